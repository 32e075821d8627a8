import json

from django.core.management.base import BaseCommand, CommandError

from agents.turns.retention import apply_retention


class Command(BaseCommand):
    help = (
        "Summarise and delete finished turns older than TOOLHUB_RETENTION_DAYS with their events, messages and "
        "routing logs, and the conversations that leaves empty (what the beat task runs); prints what went as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count what would go, change nothing")
        parser.add_argument("--days", type=int, help="override TOOLHUB_RETENTION_DAYS for this run (0: keep all)")
        parser.add_argument("--batch-size", type=int, help="turns per transaction (default TOOLHUB_RETENTION_BATCH)")

    def handle(self, *args, dry_run, days, batch_size, **options):
        if days is not None and days < 0:
            raise CommandError("--days is 0 (keep everything) or more.")
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size is 1 or more.")
        result = apply_retention(days=days, batch_size=batch_size, dry_run=dry_run)
        self.stdout.write(json.dumps(result.as_dict()))
