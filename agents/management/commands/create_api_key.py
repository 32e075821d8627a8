from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents.access.api_keys import create_api_key
from agents.models import ApiKey


class Command(BaseCommand):
    help = (
        "Create an API key for the API (/v1) and /mcp; the key is printed once, on the last line. "
        "It acts with the user's permissions, inside its scopes."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("name", help="what the key is for, e.g. 'ci-agent'")
        parser.add_argument("--user", default="operator", help="the account the key acts as (default: operator)")
        parser.add_argument(
            "--scope",
            action="append",
            dest="scopes",
            choices=ApiKey.Scope.values,
            help=f"what the key may do, repeatable (default: {' and '.join(ApiKey.DEFAULT_SCOPES)}): "
            + "; ".join(label for _, label in ApiKey.Scope.choices),
        )
        parser.add_argument(
            "--list-every-tool",
            action="store_true",
            help="/mcp lists every tool the key may call (for MCP clients that never call tool_search), up to "
            "TOOLHUB_MCP_LIST_ALL_TOKENS schema tokens",
        )

    def handle(self, *args, name, user, scopes, list_every_tool=False, **options):
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(f"No user named {user!r}; create it first or pass --user.")
        api_key, key = create_api_key(user=account, name=name, scopes=scopes or ApiKey.DEFAULT_SCOPES,
                                      list_every_tool=list_every_tool)  # fmt: skip
        self.stdout.write(
            f"API key {api_key.name!r} for {account.get_username()}, scopes {', '.join(api_key.scopes)} "
            "(shown once, store it now):"
        )
        self.stdout.write(key)
