"""CORS on the OAuth endpoints a browser-based MCP client fetches from another origin (toolhub.cors)."""

import json

import pytest
from oauth2_provider.models import Application

ORIGIN = "https://inspector.example"
FETCHED = [
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/oauth/register",
    "/oauth/token/",
    "/oauth/revoke/",
]


def preflight(client, path: str, method: str = "POST"):
    return client.options(path, HTTP_ORIGIN=ORIGIN, HTTP_ACCESS_CONTROL_REQUEST_METHOD=method,
                          HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type, mcp-protocol-version")  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("path", FETCHED)
def test_a_preflight_is_answered_for_any_origin_without_credentials_and_without_running_the_view(client, path):
    response = preflight(client, path)

    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "POST" in response["Access-Control-Allow-Methods"]
    assert {"content-type", "mcp-protocol-version", "authorization"} <= {
        header.strip().lower() for header in response["Access-Control-Allow-Headers"].split(",")
    }
    assert "Access-Control-Allow-Credentials" not in response
    assert Application.objects.count() == 0  # the registration view did not run


@pytest.mark.django_db
def test_metadata_registration_and_token_answers_are_readable_by_any_origin(client):
    metadata = client.get("/.well-known/oauth-protected-resource", HTTP_ORIGIN=ORIGIN)
    registered = client.post("/oauth/register", json.dumps({"client_name": "browser client",
                             "redirect_uris": ["https://inspector.example/cb"]}),
                             content_type="application/json", HTTP_ORIGIN=ORIGIN)  # fmt: skip
    refused = client.post("/oauth/token/", {"grant_type": "authorization_code", "code": "nope"}, HTTP_ORIGIN=ORIGIN)

    assert metadata.status_code == 200 and metadata["Access-Control-Allow-Origin"] == "*"
    assert registered.status_code == 201 and registered["Access-Control-Allow-Origin"] == "*"
    assert refused.status_code in (400, 401) and refused["Access-Control-Allow-Origin"] == "*"  # the error is readable
    assert "Access-Control-Allow-Credentials" not in registered


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/oauth/authorize/", "/login/", "/"])
def test_pages_a_browser_navigates_to_get_no_cors_headers(client, path):
    response = client.get(path, HTTP_ORIGIN=ORIGIN)
    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Origin" not in preflight(client, path, "GET")
