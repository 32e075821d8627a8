"""Hostile input on the OAuth endpoints: NUL bytes, lone surrogates, deep JSON and malformed identifiers are a 400
with an OAuth error object (or the consent page's error), never a 500 (agents.mcp_gateway.oauth_input).

PostgreSQL refuses a NUL byte in any string it is sent, so the same requests on SQLite only show the 400; the
`postgres` test sends them where the 500 used to happen."""

import base64
import json

import pytest
from oauth2_provider.models import Application, Grant

from tests.agents.mcp_gateway.test_oauth import PASSWORD, REDIRECT, authorize_url, consent_fields, pkce, register
from tests.support.builders import make_user

NUL = "\x00"


def assert_oauth_error(response, error: str = "invalid_request") -> dict:
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"error", "error_description"} and body["error"] == error, body
    return body


def post_json(client, path: str, raw: str):
    return client.post(path, raw, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "metadata",
    [
        {"client_name": f"a{NUL}b", "redirect_uris": [REDIRECT]},
        {"client_name": "ok", "redirect_uris": [f"{REDIRECT}{NUL}"]},
        {"client_name": "ok", "redirect_uris": [REDIRECT], f"x{NUL}": 1},
        {"client_name": "ok", "redirect_uris": [REDIRECT], "grant_types": ["authorization_code", NUL]},
    ],
    ids=["client_name", "redirect_uri", "key", "grant_type"],
)
def test_registration_with_a_nul_byte_anywhere_is_invalid_client_metadata(client, metadata):
    response = post_json(client, "/oauth/register", json.dumps(metadata))

    assert "NUL" in assert_oauth_error(response, "invalid_client_metadata")["error_description"]
    assert not Application.objects.exists()


@pytest.mark.django_db
def test_registration_with_a_lone_surrogate_is_invalid_client_metadata(client):
    raw = json.dumps({"client_name": "\ud800", "redirect_uris": [REDIRECT]})  # sent as the escape \\ud800

    response = post_json(client, "/oauth/register", raw)

    assert_oauth_error(response, "invalid_client_metadata")
    assert not Application.objects.exists()


@pytest.mark.django_db
def test_registration_with_deeply_nested_json_is_refused_unparsed(client):
    response = post_json(client, "/oauth/register", "[" * 100_000 + "]" * 100_000)

    assert "deeper" in assert_oauth_error(response, "invalid_client_metadata")["error_description"]


@pytest.mark.django_db
def test_a_body_over_djangos_upload_limit_is_a_413_oauth_error(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = post_json(client, "/oauth/register", json.dumps({"client_name": "x" * 2000, "redirect_uris": []}))

    assert response.status_code == 413 and response.json()["error"] == "invalid_client_metadata"


@pytest.mark.django_db
def test_registration_refuses_a_redirect_uri_that_does_not_parse(client):
    response = register(client, redirect_uris=["https://[::1/cb"])

    assert_oauth_error(response, "invalid_redirect_uri")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path,data",
    [
        ("/oauth/token/", {"grant_type": "authorization_code", "code": "c", "client_id": f"{NUL}x"}),
        ("/oauth/token/", {"grant_type": "authorization_code", "code": f"c{NUL}", "client_id": "x"}),
        ("/oauth/token/", {"grant_type": "refresh_token", "refresh_token": f"{NUL}", "client_id": "x"}),
        ("/oauth/token/", {"grant_type": "authorization_code", "code": "c", "client_id": "x", "code_verifier": "x"}),
        ("/oauth/token/", {"grant_type": "authorization_code", "code": "c", "client_id": "x" * 256}),
        ("/oauth/token/", {f"grant{NUL}": "x"}),
        ("/oauth/revoke/", {"token": f"t{NUL}", "client_id": "x"}),
        ("/oauth/revoke/", {"token": "t", "client_id": "é"}),
    ],
    ids=["client_id", "code", "refresh_token", "short-verifier", "long-client_id", "name", "revoke", "non-ascii-id"],
)
def test_token_and_revocation_refuse_nul_bytes_and_malformed_identifiers(client, path, data):
    response = client.post(path, data)

    assert_oauth_error(response)
    assert response["Access-Control-Allow-Origin"] == "*"  # a browser-based client can read why


@pytest.mark.django_db
@pytest.mark.parametrize("client_id", [f"{NUL}abc", "abc%00"])
def test_token_refuses_a_nul_byte_in_basic_client_credentials(client, client_id):
    credentials = base64.b64encode(f"{client_id}:secret".encode()).decode()

    response = client.post("/oauth/token/", {"grant_type": "authorization_code", "code": "c"},
                           headers={"Authorization": f"Basic {credentials}"})  # fmt: skip

    assert_oauth_error(response)


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource"])
def test_metadata_refuses_a_nul_byte_in_the_query(client, path):
    assert_oauth_error(client.get(f"{path}?x=%00"))


@pytest.mark.django_db
@pytest.mark.parametrize("signed_in", [False, True], ids=["signed-out", "signed-in"])
def test_authorize_shows_its_error_page_for_a_nul_client_id(client, signed_in):
    make_user("ops", role="operator")
    if signed_in:
        client.post("/login/", {"username": "ops", "password": PASSWORD})

    response = client.get("/oauth/authorize/?client_id=%00abc&response_type=code&redirect_uri=" + REDIRECT)

    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "This connection cannot go on" in page and "invalid_request" in page and "client_id" in page


@pytest.mark.django_db
def test_authorize_refuses_a_pkce_challenge_longer_than_rfc_7636_allows(client):
    """Stored in a 128-character column: PostgreSQL refused the 129th character with a 500 after consent."""
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    client.post("/login/", {"username": "ops", "password": PASSWORD})
    url = authorize_url(client_id, "x" * 129)

    assert client.get(url).status_code == 400
    fields = consent_fields(client.get(authorize_url(client_id, pkce()[1])).content.decode())
    assert client.post(url, fields | {"code_challenge": "x" * 129, "allow": "on"}).status_code == 400
    assert not Grant.objects.exists()


@pytest.mark.django_db
def test_a_consent_form_with_a_nul_byte_is_refused_without_a_code(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    client.post("/login/", {"username": "ops", "password": PASSWORD})
    url = authorize_url(client_id, pkce()[1])
    fields = consent_fields(client.get(url).content.decode())

    response = client.post(url, fields | {"state": f"s{NUL}", "allow": "on"})

    assert response.status_code == 400 and "This connection cannot go on" in response.content.decode()
    assert not Grant.objects.exists()


@pytest.mark.postgres  # PostgreSQL refuses NUL in text and overlong varchar: where these answered 500
@pytest.mark.django_db
def test_no_hostile_oauth_request_answers_500_on_postgresql(client):
    make_user("ops", role="operator")
    client_id = register(client).json()["client_id"]
    credentials = base64.b64encode(f"{NUL}x:y".encode()).decode()
    answers = [
        post_json(client, "/oauth/register", json.dumps({"client_name": NUL, "redirect_uris": [REDIRECT]})),
        client.get("/oauth/authorize/?client_id=%00" + "a" * 40),
        client.post("/oauth/token/", {"grant_type": "authorization_code", "code": NUL, "client_id": client_id}),
        client.post("/oauth/token/", {"grant_type": "authorization_code", "code": "c"},
                    headers={"Authorization": f"Basic {credentials}"}),
        client.post("/oauth/revoke/", {"token": NUL, "client_id": client_id}),
    ]  # fmt: skip
    client.post("/login/", {"username": "ops", "password": PASSWORD})
    answers.append(client.get("/oauth/authorize/?client_id=%00" + "a" * 40))
    long_challenge = authorize_url(client_id, "x" * 129)
    fields = consent_fields(client.get(authorize_url(client_id, pkce()[1])).content.decode())
    answers.append(client.post(long_challenge, fields | {"code_challenge": "x" * 129, "allow": "on"}))
    answers.append(client.post(authorize_url(client_id, pkce()[1]), fields | {"nonce": "n" * 300, "allow": "on"}))

    assert [response.status_code for response in answers] == [400] * len(answers)


@pytest.mark.django_db
def test_a_consent_post_naming_no_registered_client_is_400_not_500(client):
    from tests.support.builders import make_user

    client.force_login(make_user("consenting", role="operator"))
    response = client.post(
        "/oauth/authorize/",
        {"client_id": "not-registered", "redirect_uri": "https://client.example/cb", "response_type": "code",
         "scope": "mcp", "allow": "Authorize", "code_challenge": "x" * 43, "code_challenge_method": "S256"},
    )  # fmt: skip
    assert response.status_code == 400 and b"invalid_client" in response.content
