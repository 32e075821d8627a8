"""toolhub as an OAuth client of an upstream MCP server: the flow (discovery, registration, PKCE, code exchange,
client credentials), calls with the tokens, refresh, and the errors an admin reads, against a real local
authorization server (tests/support/oauth_upstream.py)."""

import logging
import time
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from catalog.mcp_client import client as mcp
from catalog.mcp_oauth import flow
from catalog.mcp_oauth.auth import MemoryGrantStore, StoredGrant, UpstreamOAuth
from catalog.mcp_oauth.discovery import check_endpoint
from catalog.mcp_oauth.http import MAX_DOCUMENT_BYTES, OAuthProblem
from tests.support.oauth_upstream import CLIENT_ID, CLIENT_SECRET

REDIRECT = "http://127.0.0.1:8000/mcp-servers/-/oauth-callback/"


def play_browser(pending: flow.PendingAuthorization) -> dict[str, str]:
    """What the authorization server's redirect brings back to the callback (it approves at once)."""
    answer = httpx2.get(pending.authorize_url)
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert location.startswith(REDIRECT)
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def connect(upstream, settings: flow.ClientSettings | None = None) -> flow.Grant:
    pending = flow.begin_authorization(upstream.url, settings or flow.ClientSettings(), REDIRECT)
    back = play_browser(pending)
    return flow.finish_authorization(pending, code=back["code"], state=back["state"], iss=back.get("iss"))


def endpoint(upstream, store, name="up") -> mcp.Endpoint:
    return mcp.Endpoint(name=name, transport=mcp.STREAMABLE_HTTP, url=upstream.url, oauth=UpstreamOAuth(name, store))


def stored(grant: flow.Grant, **changes) -> StoredGrant:
    values = {
        "tokens": grant.tokens,
        "expires_at": grant.expires_at,
        "client": grant.client,
        "authorization_server": grant.authorization_server,
        "resource_metadata": grant.resource_metadata,
    }
    return StoredGrant(**(values | changes))  # fmt: skip


def list_tools(ep: mcp.Endpoint) -> list[dict]:
    try:
        return mcp._loop_thread().submit(mcp._list(ep, 10, 100)).result(30)
    finally:
        mcp._loop_thread().submit(mcp._disconnect(mcp._loop_thread(), ep.name)).result(30)


def call(ep: mcp.Endpoint, text: str) -> mcp.McpCallResult:
    try:
        return mcp._loop_thread().submit(mcp._call(ep, "echo", {"text": text}, 10)).result(30)
    finally:
        mcp._loop_thread().submit(mcp._disconnect(mcp._loop_thread(), ep.name)).result(30)


def test_the_browser_flow_registers_toolhub_with_pkce_and_exchanges_the_code(upstream):
    pending = flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)
    query = parse_qs(urlsplit(pending.authorize_url).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [upstream.url]
    assert query["scope"] == ["tools"]  # what the server's 401 asked for
    assert pending.client["client_id"] in upstream.clients  # dynamic client registration
    back = play_browser(pending)
    grant = flow.finish_authorization(pending, code=back["code"], state=back["state"], iss=back["iss"])
    assert grant.tokens.access_token in upstream.access and grant.scope == "tools"
    assert upstream.grants == ["authorization_code"]


def test_a_registered_client_is_reused_and_a_preregistered_one_is_used_as_given(upstream):
    first = connect(upstream)
    again = connect(upstream, flow.ClientSettings(registered=first.client.model_dump(mode="json")))
    assert again.client.client_id == first.client.client_id and len(upstream.clients) == 1
    preregistered = connect(upstream, flow.ClientSettings(client_id=CLIENT_ID, client_secret=CLIENT_SECRET))
    assert preregistered.client.client_id == CLIENT_ID and len(upstream.clients) == 1


def test_a_callback_with_another_state_or_an_error_is_refused(upstream):
    pending = flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)
    back = play_browser(pending)
    with pytest.raises(OAuthProblem, match="state does not match"):
        flow.finish_authorization(pending, code=back["code"], state="forged", iss=back["iss"])
    with pytest.raises(OAuthProblem, match="answered access_denied: the user said no"):
        flow.finish_authorization(pending, code=None, state=back["state"], iss=None, error="access_denied",
                                  error_description="the user said no")  # fmt: skip
    with pytest.raises(OAuthProblem, match="another issuer"):
        flow.finish_authorization(pending, code=back["code"], state=back["state"], iss="http://evil.example")


def test_client_credentials_need_no_browser(upstream):
    grant = flow.client_credentials(upstream.url, flow.ClientSettings(client_id=CLIENT_ID, client_secret=CLIENT_SECRET))
    assert upstream.grants == ["client_credentials"] and grant.scope == "tools"
    with pytest.raises(OAuthProblem, match="token request|client credentials request"):
        flow.client_credentials(upstream.url, flow.ClientSettings(client_id=CLIENT_ID, client_secret="wrong"))


def test_calls_carry_the_token_and_an_expired_one_is_refreshed_first(upstream):
    grant = connect(upstream)
    store = MemoryGrantStore("MCP server 'up'", stored(grant))
    assert [tool["name"] for tool in list_tools(endpoint(upstream, store))] == ["echo"]
    assert upstream.mcp_authorizations[-1] == f"Bearer {grant.tokens.access_token}"

    store.grant = stored(grant, expires_at=time.time() - 1)  # expired: the SDK refreshes before the call
    upstream.access.clear()
    assert call(endpoint(upstream, store), "hi").content == "echo: hi"
    assert upstream.grants == ["authorization_code", "refresh_token"]
    assert store.grant.tokens.access_token != grant.tokens.access_token  # the rotated tokens were stored
    assert store.grant.tokens.refresh_token != grant.tokens.refresh_token
    assert store.grant.expires_at > time.time()


def test_a_server_that_needs_oauth_says_to_connect_it_on_its_page(upstream):
    with pytest.raises(mcp.McpServerUnavailable, match="needs OAuth and is not connected: connect it on its page"):
        list_tools(endpoint(upstream, MemoryGrantStore("MCP server 'up'")))
    plain = mcp.Endpoint(name="plain", transport=mcp.STREAMABLE_HTTP, url=upstream.url)
    with pytest.raises(mcp.McpServerUnavailable, match="401 Unauthorized.*This server needs OAuth: choose OAuth"):
        list_tools(plain)


def test_a_refused_token_that_cannot_be_refreshed_says_to_connect_again(upstream):
    grant = connect(upstream)
    upstream.access.clear()
    upstream.behaviour.refuse_refresh = True
    store = MemoryGrantStore("MCP server 'up'", stored(grant, expires_at=time.time() - 1))
    with pytest.raises(mcp.McpServerUnavailable, match="could not be refreshed: connect it again on its page"):
        list_tools(endpoint(upstream, store))


def test_a_403_names_the_scope_the_token_lacks(upstream):
    grant = connect(upstream)
    upstream.behaviour.required_scope = "admin"
    with pytest.raises(mcp.McpServerUnavailable, match="lacks the scope admin: add it to the server's OAuth scopes"):
        list_tools(endpoint(upstream, MemoryGrantStore("MCP server 'up'", stored(grant))))


def test_huge_metadata_is_refused_unread(upstream):
    upstream.behaviour.metadata_padding = 10 * 1024 * 1024
    with pytest.raises(OAuthProblem, match=f"more than the {MAX_DOCUMENT_BYTES:,} toolhub reads"):
        flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)


def test_huge_metadata_without_a_length_is_refused_once_the_limit_is_read(upstream):
    upstream.behaviour.metadata_padding = 10 * 1024 * 1024
    upstream.behaviour.stream_metadata = True
    with pytest.raises(OAuthProblem, match=f"is larger than the {MAX_DOCUMENT_BYTES:,} bytes toolhub reads; refused"):
        flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)


def test_malformed_metadata_is_named(upstream):
    upstream.behaviour.malformed_metadata = True
    with pytest.raises(OAuthProblem, match=r"Authorization server metadata at http://127\.0\.0\.1:\d+/\.well-known/"
                                           r"oauth-authorization-server is not JSON"):  # fmt: skip
        flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)


def test_a_token_endpoint_on_another_host_is_refused(upstream):
    upstream.behaviour.token_endpoint = "https://tokens.example.net/token"
    with pytest.raises(OAuthProblem, match="names a token_endpoint on another host"):
        flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)


def test_protected_resource_metadata_for_another_resource_is_refused(upstream):
    upstream.behaviour.resource = "http://127.0.0.1:1/mcp"
    with pytest.raises(OAuthProblem, match=r"is for http://127\.0\.0\.1:1/mcp, not for http://127\.0\.0\.1:\d+/mcp"):
        flow.begin_authorization(upstream.url, flow.ClientSettings(), REDIRECT)


def test_no_upstream_token_reaches_a_log_line_or_a_message(upstream, caplog):
    caplog.set_level(logging.DEBUG)
    grant = connect(upstream)
    store = MemoryGrantStore("MCP server 'up'", stored(grant, expires_at=time.time() - 1))
    assert call(endpoint(upstream, store), "hi").content == "echo: hi"  # refreshed
    upstream.access.clear()
    upstream.behaviour.refuse_refresh = True
    store.grant = stored(store.grant, expires_at=time.time() - 1)
    failed = call(endpoint(upstream, store), "hi")
    assert failed.is_error and "connect it again" in failed.content
    held = [grant.tokens, store.grant.tokens]
    secrets = {*upstream.refresh} | {token for tokens in held for token in (tokens.access_token, tokens.refresh_token)}
    assert len(secrets) >= 4
    text = caplog.text + failed.content
    assert not [token for token in secrets if token in text]


def test_a_refusal_on_an_open_connection_is_named_too(upstream):
    grant = connect(upstream)
    ep = endpoint(upstream, MemoryGrantStore("MCP server 'up'", stored(grant)))
    thread = mcp._loop_thread()
    try:
        assert [tool["name"] for tool in thread.submit(mcp._list(ep, 10, 100)).result(30)] == ["echo"]
        upstream.behaviour.required_scope = "admin"  # the session stays open; its next request is refused
        result = thread.submit(mcp._call(ep, "echo", {"text": "hi"}, 10)).result(30)
    finally:
        thread.submit(mcp._disconnect(thread, ep.name)).result(30)
    assert result.is_error
    assert "lacks the scope admin: add it to the server's OAuth scopes" in result.content
    assert result.content.endswith("echo was not run.")


def test_what_the_sdk_fetches_after_a_refusal_is_bounded_too(upstream):
    grant = connect(upstream)
    upstream.access.clear()  # the next request is refused: the SDK rediscovers the metadata, now huge
    upstream.behaviour.metadata_padding = 10 * 1024 * 1024
    with pytest.raises(mcp.McpServerUnavailable) as refused:
        list_tools(endpoint(upstream, MemoryGrantStore("MCP server 'up'", stored(grant))))
    assert "connect it (again) on its page. Signing in again failed: The answer of" in str(refused.value)
    assert f"is larger than the {MAX_DOCUMENT_BYTES:,} bytes toolhub reads" in str(refused.value)


def test_an_endpoint_on_the_issuers_host_with_its_default_port_spelled_out_is_accepted():
    check_endpoint("https://as.example:443/token", name="token_endpoint", issuer="https://as.example")
    check_endpoint("http://localhost:8080/token", name="token_endpoint", issuer="http://localhost:8080/")
    with pytest.raises(OAuthProblem, match="on another host"):
        check_endpoint("https://as.example:8443/token", name="token_endpoint", issuer="https://as.example")
    with pytest.raises(OAuthProblem, match="is not https"):
        check_endpoint("http://as.example/token", name="token_endpoint", issuer="http://as.example")


def test_a_token_refused_before_its_expiry_is_refreshed(upstream):
    grant = connect(upstream)
    store = MemoryGrantStore("MCP server 'up'", stored(grant))
    upstream.access.clear()  # the server stopped accepting it (restarted, revoked): still valid by its expiry
    assert call(endpoint(upstream, store), "hi").content == "echo: hi"
    assert upstream.grants == ["authorization_code", "refresh_token"]
    assert store.grant.tokens.access_token in upstream.access


def test_a_403_for_a_scope_is_not_answered_with_a_refresh(upstream):
    grant = connect(upstream)
    upstream.behaviour.required_scope = "admin"
    result = call(endpoint(upstream, MemoryGrantStore("MCP server 'up'", stored(grant))), "hi")
    assert result.is_error and "lacks the scope admin" in result.content
    assert upstream.grants == ["authorization_code"]
