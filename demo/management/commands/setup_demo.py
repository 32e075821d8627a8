"""`make run`'s setup: migrate, roles, routing vocabulary, demo catalog, model profiles, an operator login.

Safe to run again: it reuses the database, the catalog and the account.
"""

import secrets
import sys

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from agents.models import ModelProfile
from agents.router import prepare_vectors
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer
from demo.data.knowledge import MODEL_PROFILES
from toolhub.roles import OPERATOR, ensure_groups

USERNAME = "operator"
DEMO_MCP_SERVER = "loyalty"


def served_url(host: str, port: int) -> str:
    """The URL a browser opens for a server listening on host:port (all interfaces: this machine's loopback)."""
    if host in {"", "0.0.0.0", "::", "[::]"}:
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


class Command(BaseCommand):
    # The demo leaves tools unpolicied on purpose (catalog.W002; `check --deploy` errors with catalog.E001).
    requires_system_checks = []
    help = "Prepare the embedded default: migrate, load the demo catalog, create and print an operator login."

    def add_arguments(self, parser):
        # `make run` passes the address Daphne is about to serve, so the login URL printed is the real one.
        parser.add_argument("--host", default="127.0.0.1", help="Host the server listens on (make run's HOST).")
        parser.add_argument("--port", type=int, default=8000, help="Port the server listens on (make run's PORT).")

    def handle(self, *args, **options):
        self.stdout.write("Migrating the database...")
        call_command("migrate", interactive=False, verbosity=0, skip_checks=True)
        self.stdout.write("Database migrated. Loading the demo catalog...")
        groups = ensure_groups()
        call_command("load_demo_catalog", stdout=self.stdout)
        self.stdout.write("Starting the demo Loyalty MCP server and importing its tools...")
        self._sync_demo_mcp_server()
        for profile in MODEL_PROFILES:
            ModelProfile.objects.get_or_create(name=profile["name"], defaults=profile)
        self.stdout.write("Embedding the catalog and its examples (the first time takes about a minute)...")
        prepare_vectors()
        self.stdout.write("Search and routing vectors stored: a server starts on them in seconds.")
        password = self._operator_password(groups[OPERATOR])
        self.stdout.write(self.style.SUCCESS(f"Log in at {served_url(options['host'], options['port'])}/login/"))
        if password:
            self.stdout.write(self.style.SUCCESS(f"  username: {USERNAME}\n  password: {password}"))
        else:
            self.stdout.write(
                f"  username: {USERNAME} (existing account; password unchanged, "
                f"reset it with: python manage.py changepassword {USERNAME})"
            )
        self.stdout.write(
            f"  {USERNAME} has the operator role (chat, policies, knowledge, approvals). Adding MCP servers and "
            "editing model profiles need an admin: python manage.py createsuperuser"
        )

    def _sync_demo_mcp_server(self) -> None:
        """Register the demo Loyalty MCP server (stdio, its data beside the database) and sync its tools."""
        server, _ = McpServer.objects.get_or_create(
            name=DEMO_MCP_SERVER,
            defaults={
                "transport": McpServer.Transport.STDIO,
                "command": sys.executable,
                "args": ["-m", "demo.loyalty_mcp.server", "--db", str(settings.DATA_DIR / "loyalty-mcp.sqlite3")],
                # Its state is one database every caller shares: one process per toolhub process is enough.
                "connection_scope": McpServer.ConnectionScope.SHARED,
            },
        )
        result = sync_server(server)
        style = self.style.SUCCESS if result.ok else self.style.WARNING
        self.stdout.write(style(f"MCP server {server.name}: {result.summary()}"))

    def _operator_password(self, group) -> str | None:
        """Create the operator once; its generated password is kept in the data dir."""
        path = settings.DATA_DIR / "operator-password"
        user_model = get_user_model()
        user = user_model.objects.filter(username=USERNAME).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = user_model.objects.create_user(username=USERNAME, password=password)
            settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(password)
            path.chmod(0o600)
        user.groups.add(group)
        if path.exists() and user.check_password(path.read_text().strip()):
            return path.read_text().strip()
        return None
