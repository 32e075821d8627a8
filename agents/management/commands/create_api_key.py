from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents.api_keys import create_api_key


class Command(BaseCommand):
    help = "Create an API key for the OpenAI-compatible API; the key is printed once, on the last line."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("name", help="what the key is for, e.g. 'ci-agent'")
        parser.add_argument("--user", default="operator", help="the account the key acts as (default: operator)")

    def handle(self, *args, name, user, **options):
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(f"No user named {user!r}; create it first or pass --user.")
        api_key, key = create_api_key(user=account, name=name)
        self.stdout.write(f"API key {api_key.name!r} for {account.get_username()} (shown once, store it now):")
        self.stdout.write(key)
