from django.core.management.base import BaseCommand

from demo.catalog import load_demo_catalog


class Command(BaseCommand):
    # The demo leaves tools unpolicied on purpose, which `check` reports (catalog.E001).
    requires_system_checks = []
    help = "Install the demo catalog (idempotent): builtin and Loyalty tools, policies, domains, knowledge."

    def handle(self, *args, **options):
        summary = load_demo_catalog()
        self.stdout.write(
            f"Demo catalog: {summary.tools} tools ({summary.tools_created} new), "
            f"{summary.policies_created} policies, {summary.snippets_created} knowledge snippets "
            f"and {summary.examples_created} tool examples created."
        )
