"""Keep the catalog in step with what each MCP server serves, and record the sync's progress on its row.

New tools arrive without a policy (denied until an operator approves one); a
tool whose definition changed (description, schemas, title, annotations) is
updated and its policy goes back to draft; a tool the server stopped serving is
disabled, never deleted, and enabled again if it comes back. Each tool gets its
catalog name from catalog.mcp_client.names: the server's own name, or the server's
prefix before it when another tool has that name (the report says which and
why). A listed tool with an invalid name, a name listed twice, or an invalid
input or output schema is rejected with the reason and the others are
imported; a listing past TOOLHUB_MCP_MAX_TOOLS, or one that cannot be read, is
refused whole (nothing written). A failed sync closes its connection, so no
server process is left running for it.

Tools are written in batches of SYNC_BATCH, each in its own transaction, so
the page sees "importing n of N" as it goes. A sync stopped half-way leaves
the tools written so far (new ones unpolicied, so denied) and the server's
lists as they were; the next sync completes it. One sync of a server runs at
a time: it claims the row's sync phase in the database first. Never creates
or approves a policy, and never talks to a server inside a transaction.
"""

from __future__ import annotations

import copy
import datetime
import threading
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from catalog.models import RUNNING_SYNC_PHASES, McpServer, Tool, ToolPolicy
from catalog.models.schemas import validate_input_schema, validate_output_schema
from catalog.models.tokens import canonical_json
from catalog.policies.versions import record_policy_version
from catalog.search.service import catalog_state

from .client import McpServerUnavailable, connect, disconnect, list_tools
from .names import current_names, name_tools, rename_tools, taken_names, upstream_name_problem

SCHEMA_CHANGED_NOTE = "schema changed on the MCP server"
SYNC_BATCH = 100
# A sync whose row has not moved for this long is taken to be dead (its worker stopped); another may start.
STALE_SYNC = datetime.timedelta(minutes=5)
Phase = McpServer.SyncPhase


@dataclass
class SyncResult:
    server: str
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # the server's tool name -> why it was not imported
    prefixed: dict[str, str] = field(default_factory=dict)  # catalog name of a new prefixed tool -> why
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def summary(self) -> str:
        if self.error:
            return f"sync failed: {self.error}"
        text = (
            f"{len(self.new)} new, {len(self.changed)} changed, "
            f"{len(self.disabled)} disabled, {len(self.unchanged)} unchanged"
        )
        if self.prefixed:
            reasons = "; ".join(f"{name}: {why}" for name, why in self.prefixed.items())
            text += f", {len(self.prefixed)} named with the prefix ({reasons})"
        if self.rejected:
            reasons = "; ".join(f"{name}: {why}" for name, why in self.rejected.items())
            text += f", {len(self.rejected)} rejected ({reasons})"
        return text

    def report(self) -> dict:
        """What the row keeps of this sync for the page (sync_report)."""
        return {
            "new": self.new,
            "changed": self.changed,
            "disabled": self.disabled,
            "unchanged": len(self.unchanged),
            "rejected": self.rejected,
            "prefixed": self.prefixed,
            "error": self.error,
        }


def _split_listing(listed: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """(the tools that can be imported, {name: reason} of those that cannot)."""
    rejected: dict[str, str] = {}
    counts: dict[object, int] = {}
    for tool in listed:
        counts[tool.get("name")] = counts.get(tool.get("name"), 0) + 1
    for index, tool in enumerate(listed):
        name = tool.get("name")
        label = name if isinstance(name, str) and name else f"#{index}"
        problem = upstream_name_problem(name)
        if problem:
            rejected[label] = problem
            continue
        if counts[name] > 1:
            rejected[label] = f"listed {counts[name]} times with different definitions; none of them was imported"
            continue
        try:
            validate_input_schema(tool.get("input_schema"))
            if tool.get("output_schema") is not None:
                validate_output_schema(tool["output_schema"])
        except Exception as exc:  # ValidationError, or a schema that is not even JSON-like
            rejected[label] = "; ".join(getattr(exc, "messages", [str(exc)]))
    return [tool for tool in listed if tool.get("name") not in rejected], rejected


# What a sync compares: a change to any of these updates the tool and sends its policy back to draft.
DEFINITION_FIELDS = ("description", "input_schema", "title", "output_schema", "annotations")


def _definition(data: dict) -> str:
    return canonical_json({field: data.get(field) or None for field in DEFINITION_FIELDS})


def _stored_definition(tool: Tool) -> str:
    return _definition({field: getattr(tool, field) for field in DEFINITION_FIELDS})


def _send_policy_back_to_draft(tool: Tool) -> None:
    policy = ToolPolicy.objects.filter(tool=tool).first()
    if policy is None or policy.status == ToolPolicy.Status.DRAFT:
        return
    policy.status = ToolPolicy.Status.DRAFT
    policy.save(update_fields=["status", "updated_at"])
    record_policy_version(policy, note=SCHEMA_CHANGED_NOTE)


def _import_batch(batch: list[dict], names: dict[str, str], missing: set[str], result: SyncResult) -> None:
    """Write one batch of listed tools; `names`: the server's name of each -> its catalog name."""
    existing = {tool.name: tool for tool in Tool.objects.filter(name__in=[names[data["name"]] for data in batch])}
    for data in batch:
        name = names[data["name"]]
        stored = {field: data.get(field) for field in DEFINITION_FIELDS}
        stored["title"] = stored["title"] or ""
        tool = existing.get(name)
        if tool is None:
            Tool.objects.create(name=name, upstream_name=data["name"], source=Tool.Source.MCP, is_mcp=True,
                                should_defer=True, **stored)  # fmt: skip
            result.new.append(name)
            continue
        redefined = _stored_definition(tool) != _definition(data)
        returning = name in missing and not tool.enabled
        adopted = tool.upstream_name != data["name"]  # a demo tool of this name, or a row from before namespaces
        if not (redefined or returning or adopted):
            result.unchanged.append(name)
            continue
        for name_of_field, value in stored.items():
            setattr(tool, name_of_field, value)
        tool.upstream_name, tool.source, tool.is_mcp = data["name"], Tool.Source.MCP, True
        tool.enabled = tool.enabled or returning
        tool.save()
        if redefined:
            _send_policy_back_to_draft(tool)
        (result.changed if redefined or returning else result.unchanged).append(name)


def _finish(server: McpServer, names: list[str], result: SyncResult) -> None:
    server = McpServer.objects.select_for_update().get(pk=server.pk)
    served = set(names)
    gone = [name for name in server.tool_names if name not in served]
    for tool in Tool.objects.filter(name__in=gone, enabled=True):
        tool.enabled = False
        tool.save(update_fields=["enabled", "updated_at"])
        result.disabled.append(tool.name)
    server.tool_names = sorted(names)
    server.missing_tool_names = sorted((set(server.missing_tool_names) | set(gone)) - served)
    server.status, server.status_message = McpServer.Status.OK, result.summary()
    server.last_synced_at = timezone.now()
    server.sync_phase, server.sync_report, server.sync_updated_at = Phase.DONE, result.report(), timezone.now()
    server.save(
        update_fields=[
            "tool_names", "missing_tool_names", "status", "status_message", "last_synced_at",
            "sync_phase", "sync_report", "sync_updated_at",
        ]
    )  # fmt: skip


def _progress(server: McpServer, phase: str, **fields) -> None:
    McpServer.objects.filter(pk=server.pk).update(sync_phase=phase, sync_updated_at=timezone.now(), **fields)


def _claim(server: McpServer, phase: str, *, busy: frozenset[str]) -> bool:
    """Move the row to `phase` unless a fresh sync is in one of the `busy` phases (one UPDATE)."""
    now = timezone.now()
    free = ~Q(sync_phase__in=busy) | Q(sync_updated_at__lt=now - STALE_SYNC) | Q(sync_updated_at=None)
    fields = {"sync_phase": phase, "sync_done": 0, "sync_total": 0, "sync_report": {}, "sync_updated_at": now}
    return bool(McpServer.objects.filter(free, pk=server.pk).update(**fields))


def request_sync(server: McpServer) -> bool:
    """Mark the server queued for a sync; False when one is already queued or running (enqueue nothing then)."""
    return _claim(server, Phase.QUEUED, busy=RUNNING_SYNC_PHASES)


def sync_server(server: McpServer) -> SyncResult:
    """List the server's tools and bring the catalog in line; on failure nothing changes but its status."""
    result = SyncResult(server=server.name)
    if not server.enabled:
        result.error = f"MCP server {server.name!r} is disabled; enable it to sync."
        McpServer.objects.filter(pk=server.pk, sync_phase=Phase.QUEUED).update(
            sync_phase=Phase.ERROR, sync_report=result.report(), sync_updated_at=timezone.now()
        )
        return result
    if not _claim(server, Phase.CONNECTING, busy=RUNNING_SYNC_PHASES - {Phase.QUEUED}):
        result.error = f"A sync of MCP server {server.name!r} is already running."
        return result
    try:
        connect(server)
        _progress(server, Phase.LISTING)
        listed = list_tools(server)
        valid, result.rejected = _split_listing(listed)
        current = current_names(server)
        naming = name_tools(prefix=server.prefix, upstream_names=[tool["name"] for tool in valid], current=current,
                            taken=taken_names(server))  # fmt: skip
        result.rejected |= naming.rejected
        result.prefixed = {naming.names[upstream]: why for upstream, why in naming.prefixed.items()}
        valid = [tool for tool in valid if tool["name"] in naming.names]
        # A prefix changed without the form (the shell, a migration): those tools follow it first.
        renames = {current[u]: name for u, name in naming.names.items() if u in current and current[u] != name}
        rename_tools(server, renames)
        server.refresh_from_db()
        _progress(server, Phase.IMPORTING, sync_total=len(valid))
        missing = set(server.missing_tool_names)
        for start in range(0, len(valid), SYNC_BATCH):
            with transaction.atomic():
                _import_batch(valid[start : start + SYNC_BATCH], naming.names, missing, result)
            _progress(server, Phase.IMPORTING, sync_done=min(start + SYNC_BATCH, len(valid)))
        with transaction.atomic():
            _finish(server, [naming.names[tool["name"]] for tool in valid], result)
    except McpServerUnavailable as exc:
        disconnect(server)  # a refused or failed sync leaves no server process behind
        result = SyncResult(server=server.name, error=str(exc))
        McpServer.objects.filter(pk=server.pk).update(
            status=McpServer.Status.ERROR, status_message=result.error, last_synced_at=timezone.now(),
            sync_phase=Phase.ERROR, sync_report=result.report(), sync_updated_at=timezone.now(),
        )  # fmt: skip
    except Exception as exc:  # a bug or a lost database: the page must not wait for a sync that ended
        disconnect(server)
        _progress(server, Phase.ERROR, sync_report={**result.report(), "error": f"{type(exc).__name__}: {exc}"})
        raise
    server.refresh_from_db()
    return result


def sync_all() -> list[SyncResult]:
    return [sync_server(server) for server in McpServer.objects.filter(enabled=True)]


def server_for_tool(name: str) -> McpServer | None:
    """The enabled server that serves tool `name` (a catalog name) now, if any."""
    route = mcp_route(name)
    return route[0] if route is not None else None


_routes_lock = threading.Lock()
_routes: tuple[tuple[int, str], dict[str, tuple[McpServer, str]]] = ((-1, ""), {})


def mcp_route(name: str) -> tuple[McpServer, str] | None:
    """(the enabled server serving catalog tool `name`, the server's name for it), or None for a tool of no server.

    Read once per catalog state, with the enabled servers' rows: a sync that changes a server's tools changes its
    tools, and a save of a server's settings or its enabling moves the state too (catalog.search.signals),
    so a call reads no row of its own. The server is a copy of the row: a caller may change it."""
    global _routes
    state = catalog_state()
    with _routes_lock:
        if _routes[0] != state:
            _routes = (state, _route_map())
        route = _routes[1].get(name)
    if route is None:
        return None
    return copy.copy(route[0]), route[1]


def _route_map() -> dict[str, tuple[McpServer, str]]:
    """{catalog name: (server, the server's name for it)} of every MCP tool an enabled server lists (the first
    server, in the servers' order, that lists it)."""
    upstream = dict(Tool.objects.filter(source=Tool.Source.MCP).values_list("name", "upstream_name"))
    routes: dict[str, tuple[McpServer, str]] = {}
    for server in McpServer.objects.filter(enabled=True):
        for name in server.tool_names:
            if name in upstream:
                routes.setdefault(name, (server, upstream[name] or name))
    return routes
