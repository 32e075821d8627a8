"""`manage.py load_routing_vocabulary [FILE]`: add the router's seed vocabulary from a data file."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agents.router.vocabulary import DEFAULT_FILE, VocabularyError, load_vocabulary


class Command(BaseCommand):
    help = (
        "Add action words, mood words and intent examples from a JSON file (default: the shipped set) that the "
        "database lacks; rows that exist, edited or not, are left as they are."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE, help="Vocabulary JSON file.")

    def handle(self, *args, **options):
        try:
            loaded = load_vocabulary(options["file"])
        except VocabularyError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"{options['file']}: {loaded}.")
