"""OAuth 2.1 for /mcp: metadata, client registration, the code + PKCE flow through toolhub's login and consent, and
/mcp with the access token it gives (agents.mcp_gateway.oauth, agents.mcp_gateway.oauth_views,
agents.mcp_gateway.credentials)."""

import base64
import datetime
import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from agents.models import ApiKey
from tests.support.builders import make_policy, make_tool, make_user
from tests.support.mcp_asgi import McpAsgiClient

REDIRECT = "http://127.0.0.1:43117/callback"
RESOURCE = "http://testserver/mcp"
PASSWORD = "a-long-test-password"
CALC_SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


def register(client, **metadata):
    body = {"client_name": "Test MCP client", "redirect_uris": [REDIRECT]} | metadata
    return client.post("/oauth/register", json.dumps(body), content_type="application/json")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def authorize_url(client_id: str, challenge: str, *, scope="mcp", state="s-1", resource=RESOURCE, **extra) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": state,
              "code_challenge": challenge, "code_challenge_method": "S256", "scope": scope,
              "resource": resource}  # fmt: skip
    return "/oauth/authorize/?" + urlencode({k: v for k, v in (params | extra).items() if v is not None})


def consent_fields(page: str) -> dict[str, str]:
    """The hidden fields of the consent form (what the browser would post back)."""
    fields = re.findall(r'<input type="hidden" name="([^"]+)"(?: value="([^"]*)")?', page)
    return {name: value.replace("&amp;", "&") for name, value in fields}


def redirected_params(response) -> dict[str, str]:
    assert response.status_code == 302, response.content
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return {k: v[0] for k, v in parse_qs(location.query).items()}


@dataclass
class Tokens:
    client_id: str
    access_token: str
    refresh_token: str
    body: dict


def code_flow(client: Client, *, username="ops", scope="mcp", resource=RESOURCE) -> Tokens:
    """Register, log in as `username`, consent, exchange the code: what an MCP client and its user do."""
    client_id = register(client).json()["client_id"]
    verifier, challenge = pkce()
    url = authorize_url(client_id, challenge, scope=scope, resource=resource)
    assert client.post("/login/", {"username": username, "password": PASSWORD}).status_code == 302
    page = client.get(url)
    assert page.status_code == 200
    answer = client.post(url, consent_fields(page.content.decode()) | {"allow": "on"})
    code = redirected_params(answer)["code"]
    exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
                "code_verifier": verifier, "resource": resource}  # fmt: skip
    token = client.post("/oauth/token/", exchange)
    assert token.status_code == 200, token.content
    body = token.json()
    return Tokens(client_id, body["access_token"], body["refresh_token"], body)


# --- metadata (RFC 9728, RFC 8414) ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_protected_resource_metadata_names_toolhub_as_the_authorization_server(client):
    for path, resource in [("/.well-known/oauth-protected-resource/mcp", RESOURCE),
                           ("/.well-known/oauth-protected-resource", "http://testserver")]:  # fmt: skip
        document = client.get(path).json()
        assert document["resource"] == resource
        assert document["authorization_servers"] == ["http://testserver"]
        assert document["scopes_supported"] == ["mcp", "read"]
        assert document["bearer_methods_supported"] == ["header"]
    assert client.get("/.well-known/oauth-protected-resource/v1").status_code == 404


@pytest.mark.django_db
def test_authorization_server_metadata_offers_the_code_flow_with_s256_pkce_and_registration(client):
    document = client.get("/.well-known/oauth-authorization-server").json()

    assert document["issuer"] == "http://testserver"
    assert document["authorization_endpoint"] == "http://testserver/oauth/authorize/"
    assert document["token_endpoint"] == "http://testserver/oauth/token/"
    assert document["registration_endpoint"] == "http://testserver/oauth/register"
    assert document["revocation_endpoint"] == "http://testserver/oauth/revoke/"
    assert document["response_types_supported"] == ["code"]
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert "none" in document["token_endpoint_auth_methods_supported"]
    assert document["scopes_supported"] == ["mcp", "read"]


# --- dynamic client registration (RFC 7591) ---------------------------------------------------------------------


@pytest.mark.django_db
def test_registration_makes_a_public_code_flow_client(client):
    response = register(client, token_endpoint_auth_method="client_secret_basic",
                        grant_types=["authorization_code", "refresh_token"], response_types=["code"])  # fmt: skip

    assert response.status_code == 201
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none" and "client_secret" not in body
    assert body["redirect_uris"] == [REDIRECT] and body["client_name"] == "Test MCP client"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == Application.CLIENT_PUBLIC
    assert application.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE
    assert application.user is None


@pytest.mark.django_db
@pytest.mark.parametrize("uri", ["https://client.example/cb", "http://localhost/cb", "http://[::1]:8080/cb"])
def test_registration_takes_https_and_loopback_redirect_uris(client, uri):
    assert register(client, redirect_uris=[uri]).status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("metadata", "error", "says"),
    [
        ({"redirect_uris": []}, "invalid_redirect_uri", "non-empty array"),
        ({"redirect_uris": "http://127.0.0.1/cb"}, "invalid_redirect_uri", "non-empty array"),
        ({"redirect_uris": ["http://client.example/cb"]}, "invalid_redirect_uri", "use https, or http on localhost"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri", "use https"),
        ({"redirect_uris": ["https://client.example/cb#x"]}, "invalid_redirect_uri", "fragment"),
        ({"redirect_uris": [7]}, "invalid_redirect_uri", "string"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata", "must include authorization_code"),
        ({"grant_types": ["authorization_code", "implicit"]}, "invalid_client_metadata", "Unsupported grant_types"),
        ({"response_types": ["token"]}, "invalid_client_metadata", "response_types"),
        ({"client_name": ["x"]}, "invalid_client_metadata", "client_name"),
    ],
)
def test_registration_refuses_bad_metadata_with_an_rfc7591_error(client, metadata, error, says):
    response = register(client, **metadata)

    assert response.status_code == 400
    assert response.json()["error"] == error and says in response.json()["error_description"]
    assert not Application.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body", ["not json", "[1, 2]"])
def test_registration_refuses_a_body_that_is_not_a_json_object(client, body):
    response = client.post("/oauth/register", body, content_type="application/json")

    assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata"


@pytest.mark.django_db
def test_registration_can_be_turned_off(client, settings):
    settings.TOOLHUB_OAUTH_REGISTRATION = False

    assert register(client).status_code == 403
    assert not Application.objects.exists()


# --- the authorization-code flow with PKCE ----------------------------------------------------------------------


@pytest.mark.django_db
def test_authorize_sends_a_signed_out_user_to_toolhubs_login_page(client):
    client_id = register(client).json()["client_id"]
    url = authorize_url(client_id, pkce()[1])

    response = client.get(url)

    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == "/login/" and parse_qs(location.query)["next"] == [url]


@pytest.mark.django_db
def test_code_flow_logs_in_asks_consent_and_gives_tokens_that_refresh(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    verifier, challenge = pkce()
    url = authorize_url(client_id, challenge)
    login = client.post(f"/login/?next={url}", {"username": "ops", "password": PASSWORD, "next": url})
    assert login.status_code == 302 and login["Location"] == url

    page = client.get(url)
    text = page.content.decode()
    assert page.status_code == 200 and "Connect Test MCP client to toolhub?" in text
    assert "127.0.0.1:43117" in text and "List and call the tools your role allows" in text
    assert "<script" not in text.split("</head>", 1)[1]  # no inline script under the CSP
    # The form's answer redirects to the client; the policy lets the browser follow it there.
    assert "form-action 'self' http://127.0.0.1:43117" in page["Content-Security-Policy"]

    answer = client.post(url, consent_fields(text) | {"allow": "on"})
    params = redirected_params(answer)
    assert params["state"] == "s-1" and params["iss"] == "http://testserver"

    exchange = {"grant_type": "authorization_code", "code": params["code"], "redirect_uri": REDIRECT,
                "client_id": client_id, "code_verifier": verifier, "resource": RESOURCE}  # fmt: skip
    token = client.post("/oauth/token/", exchange)
    assert token.status_code == 200, token.content
    body = token.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "mcp"
    assert 0 < body["expires_in"] <= 3600 and body["refresh_token"]
    stored = AccessToken.objects.get()
    assert stored.user.username == "ops" and stored.resource == [RESOURCE]
    assert client.post("/oauth/token/", exchange).status_code == 400  # a code works once

    refreshed = client.post("/oauth/token/", {"grant_type": "refresh_token", "refresh_token": body["refresh_token"],
                                              "client_id": client_id})  # fmt: skip
    assert refreshed.status_code == 200, refreshed.content
    renewed = refreshed.json()
    assert renewed["access_token"] != body["access_token"] and renewed["refresh_token"] != body["refresh_token"]
    assert AccessToken.objects.get().resource == [RESOURCE]  # the refreshed token keeps its audience


@pytest.mark.django_db
def test_a_code_is_only_exchanged_with_its_pkce_verifier(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    _, challenge = pkce()
    url = authorize_url(client_id, challenge)
    client.post("/login/", {"username": "ops", "password": PASSWORD})
    page = client.get(url)
    code = redirected_params(client.post(url, consent_fields(page.content.decode()) | {"allow": "on"}))["code"]

    token = client.post("/oauth/token/", {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                                          "client_id": client_id, "code_verifier": pkce()[0]})  # fmt: skip

    assert token.status_code == 400 and token.json()["error"] == "invalid_grant"


@pytest.mark.django_db
def test_authorize_needs_a_pkce_challenge(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    client.post("/login/", {"username": "ops", "password": PASSWORD})

    response = client.get(authorize_url(client_id, None, code_challenge_method=None))

    assert redirected_params(response)["error"] == "invalid_request"


@pytest.mark.django_db
def test_a_plain_pkce_challenge_gets_no_code(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    client.post("/login/", {"username": "ops", "password": PASSWORD})
    url = authorize_url(client_id, "x" * 43, code_challenge_method="plain")
    page = client.get(url)  # the library refuses "plain" when it would make the code, after consent

    params = redirected_params(client.post(url, consent_fields(page.content.decode()) | {"allow": "on"}))

    assert params["error"] == "invalid_request" and "S256" in params["error_description"] and "code" not in params


@pytest.mark.django_db
def test_denying_consent_sends_the_client_access_denied(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    url = authorize_url(client_id, pkce()[1])
    client.post("/login/", {"username": "ops", "password": PASSWORD})
    page = client.get(url)

    params = redirected_params(client.post(url, consent_fields(page.content.decode())))

    assert params["error"] == "access_denied" and not AccessToken.objects.exists()


@pytest.mark.django_db
def test_authorize_refuses_an_unregistered_redirect_uri_without_redirecting(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    client.post("/login/", {"username": "ops", "password": PASSWORD})

    response = client.get(authorize_url(client_id, pkce()[1], redirect_uri="https://evil.example/cb"))

    assert response.status_code == 400 and "This connection cannot go on" in response.content.decode()


@pytest.mark.django_db
def test_the_consent_page_tells_a_viewer_it_may_list_but_not_call_tools(client):
    make_user("reader", role="viewer")
    client_id = register(client).json()["client_id"]
    client.post("/login/", {"username": "reader", "password": PASSWORD})

    text = client.get(authorize_url(client_id, pkce()[1])).content.decode()

    assert "List the tools policy allows" in text and "Calling a tool needs the operator role." in text


# --- /mcp with an access token ----------------------------------------------------------------------------------


@sync_to_async
def token_for(role: str | None, *, scope="mcp", resource=RESOURCE) -> Tokens:
    make_policy(make_tool("calculate", input_schema=CALC_SCHEMA, always_load=True))
    user = make_user("ops", role=role or "viewer")
    if role is None:
        user.groups.clear()
    return code_flow(Client(), scope=scope, resource=resource)


def mcp_client(endpoint, token: str | None) -> McpAsgiClient:
    return McpAsgiClient(endpoint, token, host="testserver")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_operators_token_lists_and_calls_tools_as_the_operators_key_would(mcp_endpoint):
    tokens = await token_for("operator")
    client = mcp_client(mcp_endpoint, tokens.access_token)

    assert (await client.initialize()).status == 200
    listed = await client.list_tools()
    assert listed.status == 200 and [t["name"] for t in listed.result["tools"]] == ["calculate"]
    called = await client.call_tool("calculate", {"expression": "6 * 7"})
    assert called.status == 200 and json.loads(called.result["content"][0]["text"])["result"] == 42

    key = await sync_to_async(ApiKey.objects.get)(oauth_application__client_id=tokens.client_id)
    assert key.name == "OAuth: Test MCP client" and key.last_used_at is not None


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_viewers_token_lists_tools_but_cannot_call_one(mcp_endpoint):
    client = mcp_client(mcp_endpoint, (await token_for("viewer")).access_token)

    assert (await client.initialize()).status == 200
    assert (await client.list_tools()).status == 200
    called = await client.call_tool("calculate", {"expression": "1 + 1"})
    assert called.status == 403 and "www-authenticate" not in called.headers
    assert "may not call a tool" in called.error["message"] and "agents.add_turn" in called.error["message"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_read_only_token_is_asked_for_the_mcp_scope_to_call_a_tool(mcp_endpoint):
    client = mcp_client(mcp_endpoint, (await token_for("operator", scope="read")).access_token)

    assert (await client.initialize()).status == 200
    called = await client.call_tool("calculate", {"expression": "1 + 1"})
    assert called.status == 403
    assert called.headers["www-authenticate"] == 'Bearer error="insufficient_scope", scope="mcp"'
    assert called.error["message"].startswith("This access token may not call a tool")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_token_of_a_user_without_a_role_is_refused_mcp(mcp_endpoint):
    reply = await mcp_client(mcp_endpoint, (await token_for(None)).access_token).initialize()

    assert reply.status == 403 and "catalog.view_tool" in reply.error["message"]


def assert_challenge(reply, *, error: str | None):
    assert reply.status == 401
    challenge = reply.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="mcp"' in challenge
    assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_without_credentials_mcp_answers_401_pointing_at_the_resource_metadata(mcp_endpoint):
    assert_challenge(await mcp_client(mcp_endpoint, None).initialize(), error=None)
    assert_challenge(await mcp_client(mcp_endpoint, "not-a-token").initialize(), error="invalid_token")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_expired_token_is_refused_with_a_challenge(mcp_endpoint):
    tokens = await token_for("operator")
    past = timezone.now() - datetime.timedelta(seconds=1)
    await sync_to_async(AccessToken.objects.update)(expires=past)

    assert_challenge(await mcp_client(mcp_endpoint, tokens.access_token).initialize(), error="invalid_token")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_revoked_token_is_refused_with_a_challenge(mcp_endpoint):
    tokens = await token_for("operator")
    client = mcp_client(mcp_endpoint, tokens.access_token)
    assert (await client.initialize()).status == 200

    revoke = {"token": tokens.access_token, "client_id": tokens.client_id}
    assert (await sync_to_async(Client().post)("/oauth/revoke/", revoke)).status_code == 200

    assert_challenge(await mcp_client(mcp_endpoint, tokens.access_token).initialize(), error="invalid_token")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_revoking_the_clients_key_cuts_its_tokens_off(mcp_endpoint):
    tokens = await token_for("operator")
    client = mcp_client(mcp_endpoint, tokens.access_token)
    assert (await client.initialize()).status == 200

    await sync_to_async(ApiKey.objects.filter(oauth_application__client_id=tokens.client_id).update)(revoked=True)

    assert_challenge(await mcp_client(mcp_endpoint, tokens.access_token).initialize(), error="invalid_token")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_token_for_another_resource_is_refused(mcp_endpoint):
    tokens = await token_for("operator", resource="https://other.example/mcp")

    assert_challenge(await mcp_client(mcp_endpoint, tokens.access_token).initialize(), error="invalid_token")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_refreshed_token_acts_as_the_same_client_key(mcp_endpoint):
    tokens = await token_for("operator")
    assert (await mcp_client(mcp_endpoint, tokens.access_token).initialize()).status == 200
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token, "client_id": tokens.client_id}
    renewed = (await sync_to_async(Client().post)("/oauth/token/", refresh)).json()["access_token"]

    assert (await mcp_client(mcp_endpoint, renewed).initialize()).status == 200
    assert_challenge(await mcp_client(mcp_endpoint, tokens.access_token).initialize(), error="invalid_token")
    assert await sync_to_async(ApiKey.objects.filter(oauth_application__client_id=tokens.client_id).count)() == 1


# --- the periodic cleanup -------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_beat_task_clears_expired_and_revoked_tokens_and_codes_and_keeps_usable_ones(settings):
    from agents.tasks import clear_expired_oauth_tokens

    user = make_user()
    app = Application.objects.create(name="c", client_type=Application.CLIENT_PUBLIC, redirect_uris=REDIRECT,
                                     authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE)  # fmt: skip
    now = timezone.now()
    refresh_life = datetime.timedelta(seconds=settings.TOOLHUB_OAUTH_REFRESH_TOKEN_SECONDS)

    def token(name: str, expires, *, refresh: bool = False, revoked=None) -> AccessToken:
        access = AccessToken.objects.create(user=user, application=app, token=f"a-{name}", expires=expires, scope="mcp")
        if refresh:
            RefreshToken.objects.create(user=user, application=app, token=f"r-{name}", access_token=access,
                                        revoked=revoked)  # fmt: skip
        return access

    token("live", now + datetime.timedelta(hours=1))
    token("expired", now - datetime.timedelta(seconds=1))
    token("refreshable", now - datetime.timedelta(hours=1), refresh=True)  # its refresh token still gets a new one
    token("dormant", now - refresh_life - datetime.timedelta(hours=1), refresh=True)
    token("revoked-recently", now - datetime.timedelta(hours=1), refresh=True, revoked=now)  # kept: reuse detection
    token("revoked-long-ago", now - refresh_life - datetime.timedelta(hours=1), refresh=True,
          revoked=now - refresh_life - datetime.timedelta(hours=1))  # fmt: skip
    for name, expires in (("fresh", now + datetime.timedelta(minutes=1)), ("stale", now - datetime.timedelta(1))):
        Grant.objects.create(user=user, application=app, code=name, expires=expires, redirect_uri=REDIRECT,
                             code_challenge="x" * 43, code_challenge_method="S256")  # fmt: skip

    assert "clear-expired-oauth-tokens" in settings.CELERY_BEAT_SCHEDULE
    clear_expired_oauth_tokens.apply().get()
    clear_expired_oauth_tokens.apply().get()  # twice changes nothing more

    assert sorted(AccessToken.objects.values_list("token", flat=True)) == [
        "a-live", "a-refreshable", "a-revoked-recently"]  # fmt: skip
    assert sorted(RefreshToken.objects.values_list("token", flat=True)) == ["r-refreshable", "r-revoked-recently"]
    assert list(Grant.objects.values_list("code", flat=True)) == ["fresh"]
