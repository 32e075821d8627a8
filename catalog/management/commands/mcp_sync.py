from django.core.management.base import BaseCommand, CommandError

from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer


class Command(BaseCommand):
    # New MCP tools are unpolicied until an operator approves them, which `check` reports (catalog.E001).
    requires_system_checks = []
    help = "Sync the catalog with the tools of one MCP server (by name) or of every enabled one."

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", help="Name of the MCP server; all enabled servers if omitted.")

    def handle(self, *args, name=None, **options):
        if name:
            server = McpServer.objects.filter(name=name).first()
            if server is None:
                raise CommandError(f"There is no MCP server named {name!r}.")
            servers = [server]
        else:
            servers = list(McpServer.objects.filter(enabled=True))
            if not servers:
                self.stdout.write("No enabled MCP servers to sync.")
                return
        failed = 0
        for server in servers:
            result = sync_server(server)
            if not result.ok:
                failed += 1
                self.stderr.write(self.style.ERROR(f"{server.name}: {result.error}"))
                continue
            self.stdout.write(f"{server.name}: {result.summary()}")
            if result.new:
                self.stdout.write(f"  denied until an operator approves a policy: {', '.join(result.new)}")
            if result.changed:
                self.stdout.write(
                    f"  changed (policy back to draft if the schema changed): {', '.join(result.changed)}"
                )
            if result.disabled:
                self.stdout.write(f"  no longer served, disabled: {', '.join(result.disabled)}")
        if failed:
            raise CommandError(f"{failed} of {len(servers)} MCP server(s) failed to sync.")
