"""Keep the catalog in step with what each MCP server serves, all or nothing per server.

New tools arrive without a policy (denied until an operator approves one); a
tool whose definition changed is updated and its policy goes back to draft;
a tool the server stopped serving is disabled, never deleted, and enabled
again if it comes back. Never creates or approves a policy, and never talks
to a server inside a database transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from .mcp_client import McpServerUnavailable, list_tools
from .models import McpServer, Tool, ToolPolicy
from .policies import record_policy_version
from .schemas import validate_input_schema, validate_tool_name
from .tokens import canonical_json

SCHEMA_CHANGED_NOTE = "schema changed on the MCP server"


@dataclass
class SyncResult:
    server: str
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def summary(self) -> str:
        if self.error:
            return f"sync failed: {self.error}"
        return (
            f"{len(self.new)} new, {len(self.changed)} changed, "
            f"{len(self.disabled)} disabled, {len(self.unchanged)} unchanged"
        )


class SyncRejected(Exception):
    """What the server listed cannot be taken into the catalog; nothing was written."""


def _listing_problems(listed: list[dict]) -> list[str]:
    problems, seen = [], set()
    for index, tool in enumerate(listed):
        name = tool.get("name")
        try:
            validate_tool_name(name)
            validate_input_schema(tool.get("input_schema"))
        except Exception as exc:  # ValidationError, or a schema that is not even JSON-like
            messages = getattr(exc, "messages", [str(exc)])
            problems.append(f"{name or f'#{index}'}: {'; '.join(messages)}")
        if name in seen:
            problems.append(f"{name}: listed twice")
        seen.add(name)
    return problems


def _definition(name: str, description: str, schema: dict) -> str:
    """What a tool's schema_hash is computed from, serialized the same way."""
    return canonical_json(Tool(name=name, description=description, input_schema=schema).function_definition())


def _send_policy_back_to_draft(tool: Tool) -> None:
    policy = ToolPolicy.objects.filter(tool=tool).first()
    if policy is None or policy.status == ToolPolicy.Status.DRAFT:
        return
    policy.status = ToolPolicy.Status.DRAFT
    policy.save(update_fields=["status", "updated_at"])
    record_policy_version(policy, note=SCHEMA_CHANGED_NOTE)


def _conflicts(server: McpServer, listed: list[dict], existing: dict[str, Tool]) -> list[str]:
    owners = {
        name: other.name
        for other in McpServer.objects.exclude(pk=server.pk).only("name", "tool_names")
        for name in other.tool_names
    }
    ours = set(server.tool_names) | set(server.missing_tool_names)
    problems = []
    for name in (tool["name"] for tool in listed):
        if name in owners:
            problems.append(f"{name}: already served by MCP server {owners[name]!r}")
        elif name in existing and name not in ours and existing[name].source != Tool.Source.MCP:
            problems.append(f"{name}: a {existing[name].source} tool of that name exists")
    return problems


def _apply(server: McpServer, listed: list[dict], result: SyncResult) -> None:
    server = McpServer.objects.select_for_update().get(pk=server.pk)  # one sync of a server at a time
    names = [tool["name"] for tool in listed]
    existing = {tool.name: tool for tool in Tool.objects.filter(name__in=[*names, *server.tool_names])}
    problems = _listing_problems(listed) or _conflicts(server, listed, existing)
    if problems:
        raise SyncRejected("the server's tool list was rejected, nothing changed: " + "; ".join(problems))
    missing = set(server.missing_tool_names)
    for data in listed:
        name, description, schema = data["name"], data["description"], data["input_schema"]
        tool = existing.get(name)
        if tool is None:
            Tool.objects.create(
                name=name, description=description, input_schema=schema,
                source=Tool.Source.MCP, is_mcp=True, should_defer=True,
            )  # fmt: skip
            result.new.append(name)
            continue
        redefined = _definition(name, tool.description, tool.input_schema) != _definition(name, description, schema)
        returning = name in missing and not tool.enabled
        if not (redefined or returning):
            result.unchanged.append(name)
            continue
        tool.description, tool.input_schema = description, schema
        tool.source, tool.is_mcp = Tool.Source.MCP, True
        tool.enabled = tool.enabled or returning
        tool.save()
        if redefined:
            _send_policy_back_to_draft(tool)
        result.changed.append(name)
    gone = [name for name in server.tool_names if name not in set(names)]
    for name in gone:
        tool = existing.get(name)
        if tool is not None and tool.enabled:
            tool.enabled = False
            tool.save(update_fields=["enabled", "updated_at"])
            result.disabled.append(name)
    server.tool_names = sorted(names)
    server.missing_tool_names = sorted((missing | set(gone)) - set(names))
    server.status, server.status_message = McpServer.Status.OK, result.summary()
    server.last_synced_at = timezone.now()
    server.save(update_fields=["tool_names", "missing_tool_names", "status", "status_message", "last_synced_at"])


def sync_server(server: McpServer) -> SyncResult:
    """List the server's tools and bring the catalog in line; on failure nothing changes but its status."""
    result = SyncResult(server=server.name)
    if not server.enabled:
        result.error = f"MCP server {server.name!r} is disabled; enable it to sync."
        return result
    try:
        listed = list_tools(server)
        with transaction.atomic():
            _apply(server, listed, result)
    except (McpServerUnavailable, SyncRejected) as exc:
        result = SyncResult(server=server.name, error=str(exc))
        McpServer.objects.filter(pk=server.pk).update(
            status=McpServer.Status.ERROR, status_message=result.error, last_synced_at=timezone.now()
        )
    server.refresh_from_db(fields=["tool_names", "missing_tool_names", "status", "status_message", "last_synced_at"])
    return result


def sync_all() -> list[SyncResult]:
    return [sync_server(server) for server in McpServer.objects.filter(enabled=True)]


def server_for_tool(name: str) -> McpServer | None:
    """The enabled server that serves tool `name` now, if any."""
    for server in McpServer.objects.filter(enabled=True):
        if name in server.tool_names:
            return server
    return None
