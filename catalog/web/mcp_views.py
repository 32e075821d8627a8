"""Dashboard pages of the MCP servers: list, add/edit, test a connection, sync with live progress.

Thin: permissions, forms and rendering only; syncing is catalog.mcp_client.sync (run by
the sync_mcp_server task), connecting is catalog.mcp_client.client. Viewing needs
catalog.view_mcpserver; every POST needs add_mcpserver or change_mcpserver.
Never shows a server's env or header values to someone who cannot edit it.
"""

from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from catalog.mcp_client.names import prefixed_tools
from catalog.mcp_oauth.grants import grant_facts
from catalog.models import McpServer, Tool
from catalog.policies.selectors import tools_needing_policy
from catalog.tasks import sync_mcp_server

from .mcp_forms import McpServerForm

VIEW = "catalog.view_mcpserver"
ADD = "catalog.add_mcpserver"
CHANGE = "catalog.change_mcpserver"
NEEDS_POLICY_SHOWN = 50  # the rest are one click away on the catalog's "no policy" filter


def _needs(permission: str):
    """Anonymous -> login page; signed in without `permission` -> 403."""

    def decorate(view):
        return login_required(permission_required(permission, raise_exception=True)(view))

    return decorate


def _sync_context(server: McpServer) -> dict:
    report = server.sync_report or {}
    synced = set(report.get("new", [])) | set(report.get("changed", []))
    needing = tools_needing_policy().filter(name__in=synced).select_related("policy") if synced else Tool.objects.none()
    shown = list(needing[:NEEDS_POLICY_SHOWN])
    count = len(shown) if len(shown) < NEEDS_POLICY_SHOWN else needing.count()
    return {"server": server, "report": report, "needs_policy": shown, "needs_policy_count": count,
            "needs_policy_more": count - len(shown)}  # fmt: skip


@_needs(VIEW)
def server_list(request):
    servers = McpServer.objects.all()
    return render(request, "catalog/mcp_servers.html", {"servers": servers, "can_change": request.user.has_perm(CHANGE),
                                                        "can_add": request.user.has_perm(ADD)})  # fmt: skip


@_needs(VIEW)
def server_detail(request, name):
    server = get_object_or_404(McpServer, name=name)
    context = _sync_context(server) | {"can_change": request.user.has_perm(CHANGE), "prefixed": prefixed_tools(server),
                                       "oauth": grant_facts(server, request.user)}  # fmt: skip
    return render(request, "catalog/mcp_server_detail.html", context)


@_needs(VIEW)
def sync_progress(request, name):
    """The progress fragment; it polls itself every second while the sync runs."""
    server = get_object_or_404(McpServer, name=name)
    return render(request, "catalog/mcp_server_detail.html#sync-progress", _sync_context(server))


@_needs(ADD)
def server_add(request):
    form = McpServerForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        server = form.save()
        return redirect("mcp-server-detail", name=server.name)
    return render(request, "catalog/mcp_server_form.html", {"form": form, "server": None})


@_needs(CHANGE)
def server_edit(request, name):
    server = get_object_or_404(McpServer, name=name)
    form = McpServerForm(request.POST or None, instance=server)
    if request.method == "POST" and form.is_valid():
        server = form.save()
        return redirect("mcp-server-detail", name=server.name)
    return render(request, "catalog/mcp_server_form.html", {"form": form, "server": server})


@require_POST
@_needs(CHANGE)
def test_connection(request, name):
    """Connect and list the tools; shows the count or the error and changes nothing stored."""
    # Imported here: only the processes that talk to MCP servers load the SDK's client.
    from catalog.mcp_client.client import McpServerUnavailable, disconnect, list_tools

    server = get_object_or_404(McpServer, name=name)
    try:
        tools = list_tools(server)
    except McpServerUnavailable as exc:
        disconnect(server)  # a failed test leaves no server process behind
        outcome = {"ok": False, "message": str(exc)}
    else:
        outcome = {"ok": True, "count": len(tools)}
    context = _sync_context(server) | {"can_change": True, "test": outcome}
    template = "catalog/mcp_server_detail.html#test-result" if request.htmx else "catalog/mcp_server_detail.html"
    return render(request, template, context)


@require_POST
@_needs(CHANGE)
def start_sync(request, name):
    """Queue a sync (unless one is queued or running) and show its progress."""
    from catalog.mcp_client.sync import request_sync

    server = get_object_or_404(McpServer, name=name)
    if request_sync(server):
        sync_mcp_server.delay_on_commit(server.pk)
    if not request.htmx:
        return redirect("mcp-server-detail", name=server.name)
    server.refresh_from_db()
    return render(request, "catalog/mcp_server_detail.html#sync-progress", _sync_context(server))
