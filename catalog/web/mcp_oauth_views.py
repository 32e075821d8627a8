"""Connecting an MCP server that needs OAuth, from its page: the redirect to its authorization server, the
callback that finishes the exchange, client credentials, and disconnecting.

Thin: the flow is catalog.mcp_oauth.flow, storage catalog.mcp_oauth.grants. Toolhub's own account (a service
account) needs catalog.change_mcpserver; on a per-user server anyone who may view it connects their own account.
The pending authorization (state, PKCE verifier) lives in the signed-in user's session until its callback, so any
process can finish it and a callback this browser did not start is refused. Never shows a token.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from catalog.mcp_oauth.flow import PendingAuthorization, begin_authorization, client_credentials, finish_authorization
from catalog.mcp_oauth.grants import SERVICE_MODES, client_settings, forget_grant, save_grant
from catalog.mcp_oauth.http import OAuthProblem
from catalog.models import McpServer

from .mcp_views import CHANGE, VIEW

PENDING = "mcp_oauth_pending"  # session key: state -> pending authorization
MAX_PENDING = 5  # per session; older ones are dropped


def _account_of(request, server: McpServer):
    """Whose account connecting `server` is for: None (toolhub's own, needs CHANGE) or the user (per-user server)."""
    if server.oauth in SERVICE_MODES:
        if not request.user.has_perm(CHANGE):
            raise PermissionDenied
        return None
    if server.oauth == McpServer.OAuth.PER_USER and request.user.has_perm(VIEW):
        return request.user
    raise PermissionDenied


def _failed(request, server: McpServer, problem: Exception):
    messages.error(request, f"Connecting {server.name} failed: {problem}")
    return redirect("mcp-server-detail", name=server.name)


@require_POST
@login_required
def connect(request, name):
    """Start connecting: client credentials at once, or send the browser on to the authorization server."""
    server = get_object_or_404(McpServer, name=name)
    if not server.oauth or server.transport != McpServer.Transport.STREAMABLE_HTTP:
        raise PermissionDenied
    account = _account_of(request, server)
    if server.oauth == McpServer.OAuth.SERVICE_CLIENT_CREDENTIALS:
        try:
            grant = client_credentials(server.url, client_settings(server))
        except OAuthProblem as problem:
            return _failed(request, server, problem)
        save_grant(server, grant, connected_by=request.user)
        _reconnect(server)
        messages.success(request, f"{server.name} is connected with toolhub's client credentials.")
        return redirect("mcp-server-detail", name=server.name)
    redirect_uri = request.build_absolute_uri(reverse("mcp-oauth-callback"))
    try:
        pending = begin_authorization(server.url, client_settings(server), redirect_uri)
    except OAuthProblem as problem:
        return _failed(request, server, problem)
    kept = dict(list(request.session.get(PENDING, {}).items())[-(MAX_PENDING - 1) :])
    kept[pending.state] = {"server": server.pk, "user": account.pk if account else None} | pending.as_json()
    request.session[PENDING] = kept
    # A page that moves on by itself rather than a redirect: the page's form-action (CSP) holds a form's redirect
    # to another origin, and the authorization server's origin is known only now.
    context = {"server": server, "authorize_url": pending.authorize_url,
               "issuer": pending.authorization_server.get("issuer", "")}  # fmt: skip
    response = render(request, "catalog/mcp_oauth_redirect.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@login_required
def callback(request):
    """Where the authorization server sends the browser back: check, exchange the code, store the tokens."""
    state = request.GET.get("state", "")
    kept = request.session.get(PENDING, {})
    entry = kept.pop(state, None) if isinstance(state, str) else None
    request.session[PENDING] = kept
    if entry is None:
        context = {"message": "This answer belongs to no authorization this browser started (or it was finished "
                   "already). Start again from the MCP server's page."}  # fmt: skip
        return render(request, "catalog/mcp_oauth_callback.html", context, status=400)
    server = get_object_or_404(McpServer, pk=entry.pop("server"))
    user_id = entry.pop("user")
    if user_id is not None and user_id != request.user.pk:
        raise PermissionDenied
    account = _account_of(request, server)
    pending = PendingAuthorization.from_json(entry)
    if pending.server_url != server.url:
        return _failed(request, server, OAuthProblem("its URL changed meanwhile; connect it again."))
    try:
        grant = finish_authorization(pending, code=request.GET.get("code"), state=state, iss=request.GET.get("iss"),
                                     error=request.GET.get("error"),
                                     error_description=request.GET.get("error_description"))  # fmt: skip
    except OAuthProblem as problem:
        return _failed(request, server, problem)
    save_grant(server, grant, user=account, connected_by=request.user)
    if account is None:
        _reconnect(server)
    whose = "your account" if account is not None else "toolhub's account"
    messages.success(request, f"{server.name} is connected with {whose} (scopes: {grant.scope or 'none named'}).")
    return redirect("mcp-server-detail", name=server.name)


@require_POST
@login_required
def disconnect(request, name):
    """Forget the tokens (toolhub's own, or the user's on a per-user server); the upstream grant is not revoked."""
    server = get_object_or_404(McpServer, name=name)
    account = _account_of(request, server)
    if forget_grant(server, user=account) and account is None:
        _reconnect(server)
    messages.success(request, f"toolhub forgot its tokens for {server.name}.")
    return redirect("mcp-server-detail", name=server.name)


def _reconnect(server: McpServer) -> None:
    """This process's connection takes the new tokens at once; other processes' on their next refusal."""
    from catalog.mcp_client.client import disconnect as close_connection

    close_connection(server)
