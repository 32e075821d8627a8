"""Connecting an OAuth MCP server from its page: the redirect, the callback, calls with the stored (encrypted)
tokens and their refresh, client credentials, per-user accounts, and what a failed connect shows."""

import datetime
import time
from urllib.parse import urlsplit

import httpx2
import pytest
from django.db import connection
from django.utils import timezone
from django.utils.html import escape

from catalog.mcp_client.callers import Caller, calling_as
from catalog.mcp_client.client import (
    Endpoint,
    McpServerUnavailable,
    _list,
    _loop_thread,
    call_tool,
    disconnect,
    list_tools,
)
from catalog.mcp_oauth.auth import EXPIRY_MARGIN_SECONDS
from catalog.mcp_oauth.grants import upstream_oauth
from catalog.models import McpOAuthGrant, McpServer
from tests.support.builders import make_user
from tests.support.oauth_upstream import CLIENT_ID, CLIENT_SECRET, start_upstream

# The connection's token store reads the grant from another thread: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def upstream():
    upstream, server = start_upstream()
    yield upstream
    server.should_exit = True


def oauth_server(upstream, mode=McpServer.OAuth.SERVICE_BROWSER, **fields) -> McpServer:
    return McpServer.objects.create(name="up", transport=McpServer.Transport.STREAMABLE_HTTP, url=upstream.url,
                                    oauth=mode, **fields)  # fmt: skip


def connect_in_browser(client, server: McpServer):
    """Press Connect, let the authorization server approve, and follow its redirect back to toolhub."""
    started = client.post(f"/mcp-servers/{server.name}/oauth/connect/")
    authorize_url = started.context["authorize_url"]
    assert started.status_code == 200 and authorize_url.startswith(f"{server.url.removesuffix('/mcp')}/authorize?")
    assert f'<meta http-equiv="refresh" content="0;url={escape(authorize_url)}">' in started.text
    approved = httpx2.get(authorize_url)
    back = urlsplit(approved.headers["location"])
    assert back.path == "/mcp-servers/-/oauth-callback/"
    return client.get(f"{back.path}?{back.query}")


def test_an_admin_connects_toolhub_and_calls_use_the_token_refreshed_when_it_expires(client, upstream):
    server = oauth_server(upstream)
    client.force_login(make_user("admin", role="admin"))
    page = client.get("/mcp-servers/up/").text
    assert "Not connected: calls to this server fail until an admin connects it." in page
    finished = connect_in_browser(client, server)
    assert finished.status_code == 302 and finished.url == "/mcp-servers/up/"

    grant = McpOAuthGrant.objects.get(server=server, user=None)
    token = grant.tokens["access_token"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT tokens FROM catalog_mcpoauthgrant")
        (raw,) = cursor.fetchone()
    assert raw.startswith("fernet:") and token not in raw  # encrypted at rest
    page = client.get("/mcp-servers/up/").text
    assert "Connected by admin" in page and "scopes: tools" in page and token not in page
    assert "is connected with toolhub&#x27;s account" in page

    try:
        assert [tool["name"] for tool in list_tools(server)] == ["echo"]
        assert upstream.mcp_authorizations[-1] == f"Bearer {token}"
        disconnect(server)
        McpOAuthGrant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - datetime.timedelta(minutes=1))
        upstream.access.clear()  # the old token no longer works: only a refresh lets the call through
        assert call_tool(server, "echo", {"text": "hi"}).content == "echo: hi"
    finally:
        disconnect(server)
    grant.refresh_from_db()
    assert upstream.grants == ["authorization_code", "refresh_token"]
    assert grant.tokens["access_token"] != token and grant.refreshed_at is not None
    assert grant.expires_at > timezone.now()


def test_disconnect_forgets_the_tokens_and_calls_then_say_to_connect(client, upstream):
    server = oauth_server(upstream)
    client.force_login(make_user("admin", role="admin"))
    connect_in_browser(client, server)
    assert client.post("/mcp-servers/up/oauth/disconnect/").status_code == 302
    assert not McpOAuthGrant.objects.exists()
    result = call_tool(server, "echo", {"text": "hi"})
    disconnect(server)
    assert result.is_error and "needs OAuth and is not connected: connect it on its page" in result.content


def test_client_credentials_connect_without_a_browser(client, upstream):
    server = oauth_server(upstream, McpServer.OAuth.SERVICE_CLIENT_CREDENTIALS, oauth_client_id=CLIENT_ID,
                          oauth_client_secret=CLIENT_SECRET)  # fmt: skip
    client.force_login(make_user("admin", role="admin"))
    response = client.post("/mcp-servers/up/oauth/connect/")
    assert response.status_code == 302 and response.url == "/mcp-servers/up/"
    assert upstream.grants == ["client_credentials"]
    try:
        assert call_tool(server, "echo", {"text": "cc"}).content == "echo: cc"
        disconnect(server)
        McpOAuthGrant.objects.update(expires_at=timezone.now() - datetime.timedelta(minutes=1))
        upstream.access.clear()
        upstream.refresh.clear()  # no refresh either: client credentials ask again, no person needed
        assert call_tool(server, "echo", {"text": "again"}).content == "echo: again"
    finally:
        disconnect(server)
    assert upstream.grants == ["client_credentials", "client_credentials"]


def test_client_credentials_without_refresh_tokens_ask_again_on_an_open_connection(client, upstream):
    server = oauth_server(upstream, McpServer.OAuth.SERVICE_CLIENT_CREDENTIALS, oauth_client_id=CLIENT_ID,
                          oauth_client_secret=CLIENT_SECRET)  # fmt: skip
    upstream.behaviour.refresh_tokens = False
    upstream.behaviour.access_seconds = EXPIRY_MARGIN_SECONDS + 1  # toolhub counts it expired after a second
    client.force_login(make_user("admin", role="admin"))
    client.post("/mcp-servers/up/oauth/connect/")
    try:
        assert call_tool(server, "echo", {"text": "one"}).content == "echo: one"
        time.sleep(1.5)
        assert call_tool(server, "echo", {"text": "two"}).content == "echo: two"  # the same connection
    finally:
        disconnect(server)
    assert upstream.grants == ["client_credentials", "client_credentials"]


def test_the_edit_form_sets_oauth_and_never_shows_the_client_secret(client, upstream):
    oauth_server(upstream, McpServer.OAuth.OFF)
    client.force_login(make_user("admin", role="admin"))
    form = {"name": "up", "prefix": "up", "transport": "streamable_http", "url": upstream.url, "args": "[]",
            "env": "{}", "headers": "{}", "oauth": "service_client_credentials", "oauth_client_id": CLIENT_ID,
            "oauth_client_secret": "", "oauth_scope": "tools", "connection_scope": "shared",
            "enabled": "on"}  # fmt: skip
    refused = client.post("/mcp-servers/up/edit/", form)
    assert refused.status_code == 200 and "Client credentials need a client id and its secret." in refused.text
    assert client.post("/mcp-servers/up/edit/", form | {"oauth_client_secret": CLIENT_SECRET}).status_code == 302
    assert client.post("/mcp-servers/up/edit/", form).status_code == 302  # an empty secret keeps the current one
    mixed = client.post("/mcp-servers/up/edit/", form | {"oauth": "per_user"})  # each user's token, one connection
    assert mixed.status_code == 200 and "needs a connection per user" in mixed.text
    server = McpServer.objects.get()
    assert (server.oauth, server.oauth_client_secret, server.oauth_scope) == ("service_client_credentials",
                                                                             CLIENT_SECRET, "tools")  # fmt: skip
    assert CLIENT_SECRET not in client.get("/mcp-servers/up/edit/").text
    assert CLIENT_SECRET not in client.get("/mcp-servers/up/").text


def test_a_failed_connect_shows_why_on_the_page(client, upstream):
    oauth_server(upstream)
    upstream.behaviour.token_endpoint = "https://elsewhere.example/token"
    client.force_login(make_user("admin", role="admin"))
    page = client.post("/mcp-servers/up/oauth/connect/", follow=True).text
    assert "Connecting up failed: The authorization server" in page and "token_endpoint on another host" in page
    assert not McpOAuthGrant.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_only_an_admin_connects_toolhubs_own_account(client, upstream, role):
    oauth_server(upstream)
    client.force_login(make_user("someone", role=role))
    assert client.post("/mcp-servers/up/oauth/connect/").status_code == 403
    assert client.post("/mcp-servers/up/oauth/disconnect/").status_code == 403
    assert upstream.grants == [] and not upstream.clients


def test_on_a_per_user_server_each_user_connects_their_own_account(client, upstream):
    server = oauth_server(upstream, McpServer.OAuth.PER_USER)
    operator = make_user("ops", role="operator")
    client.force_login(operator)
    assert "Your account is not connected." in client.get("/mcp-servers/up/").text
    assert connect_in_browser(client, server).status_code == 302
    assert McpOAuthGrant.objects.get().user == operator
    page = client.get("/mcp-servers/up/").text
    assert "Your account is connected" in page and "1 user connected" in page
    other = make_user("other", role="operator")
    client.force_login(other)
    assert "Your account is not connected." in client.get("/mcp-servers/up/").text

    # A connection of the operator's own carries their token; the connection shared by every user says it cannot.
    own = Endpoint(name="up", transport=server.transport, url=server.url, oauth=upstream_oauth(server, operator))
    thread = _loop_thread()
    try:
        assert [tool["name"] for tool in thread.submit(_list(own, 10, 100)).result(30)] == ["echo"]
        assert upstream.mcp_authorizations[-1] == f"Bearer {McpOAuthGrant.objects.get().tokens['access_token']}"
    finally:
        disconnect(server)
    shared = call_tool(server, "echo", {"text": "hi"})  # no caller: the shared connection, no user's token to use
    disconnect(server)
    assert shared.is_error and "its calls need a connection per user" in shared.content
    # A call made for the operator (a turn of theirs, or their /mcp session) goes through their own connection,
    # which carries their token; one made for a user who never connected is told to connect.
    assert server.connection_scope == McpServer.ConnectionScope.PER_USER
    with calling_as(Caller(user_id=operator.pk)):
        theirs = call_tool(server, "echo", {"text": "hi"})
    assert not theirs.is_error, theirs.content
    assert upstream.mcp_authorizations[-1] == f"Bearer {McpOAuthGrant.objects.get().tokens['access_token']}"
    with calling_as(Caller(user_id=other.pk)):
        refused = call_tool(server, "echo", {"text": "hi"})
    disconnect(server)
    assert refused.is_error and "not connected: connect it on its page" in refused.content
    with pytest.raises(McpServerUnavailable, match="not connected: connect it on its page"):
        thread.submit(_list(Endpoint(name="up", transport=server.transport, url=server.url,
                                     oauth=upstream_oauth(server, other)), 10, 100)).result(30)  # fmt: skip
    disconnect(server)


def test_a_callback_from_another_users_session_is_refused(client, upstream):
    server = oauth_server(upstream)
    client.force_login(make_user("admin", role="admin"))
    started = client.post(f"/mcp-servers/{server.name}/oauth/connect/")
    back = urlsplit(httpx2.get(started.context["authorize_url"]).headers["location"])
    client.force_login(make_user("admin2", role="admin"))  # a new session: the pending authorization is not in it
    assert client.get(f"{back.path}?{back.query}").status_code == 400
    assert not McpOAuthGrant.objects.exists()
