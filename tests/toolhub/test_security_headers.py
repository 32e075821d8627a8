"""/v1 and /mcp answer with the security headers the pages get, errors included, and HSTS when the request came over
TLS (toolhub.security_headers, the middleware order in toolhub.settings)."""

import pytest
from django.test import Client

from agents.access.api_keys import create_api_key
from agents.openai_api import views as api
from tests.support.builders import make_user
from tests.support.mcp_asgi import asgi_call

PAGE_HEADERS = ("X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Cross-Origin-Opener-Policy",
                "Content-Security-Policy")  # fmt: skip
TLS_PROXY = ("HTTP_X_FORWARDED_PROTO", "https")  # what TOOLHUB_BEHIND_TLS_PROXY=1 sets


def headers_of(response) -> dict:
    return {name: response.get(name) for name in PAGE_HEADERS}


@pytest.fixture
def page_headers(client) -> dict:
    headers = headers_of(client.get("/login/"))
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert all(headers.values()), headers
    return headers


@pytest.fixture
def application(monkeypatch):
    """toolhub.asgi's application as Daphne serves it (without loading the search models at import)."""
    monkeypatch.setattr("agents.router.warm_up_in_background", lambda: None)
    from toolhub.asgi import application

    return application


@pytest.mark.django_db
def test_every_kind_of_v1_answer_has_the_pages_headers(client, page_headers, monkeypatch):
    key = create_api_key(user=make_user(), name="headers")[1]
    bearer = {"Authorization": f"Bearer {key}"}
    answers = {
        "200": client.get("/v1/models", headers=bearer),
        "401": client.get("/v1/models"),
        "404": client.get("/v1/no-such-path"),
        "405": client.delete("/v1/models"),
        "400": client.post("/v1/chat/completions", "{", content_type="application/json", headers=bearer),
    }

    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(api, "model_objects", broken)
    answers["500"] = Client(raise_request_exception=False).get("/v1/models", headers=bearer)

    assert {status: response.status_code for status, response in answers.items()} == {s: int(s) for s in answers}
    assert {status: headers_of(response) for status, response in answers.items()} == dict.fromkeys(
        answers, page_headers
    )


@pytest.mark.django_db
def test_v1_sends_hsts_only_over_tls(client, settings):
    settings.SECURE_HSTS_SECONDS, settings.SECURE_PROXY_SSL_HEADER = 3600, TLS_PROXY

    assert client.get("/v1/models", headers={"X-Forwarded-Proto": "https"})["Strict-Transport-Security"].startswith(
        "max-age=3600"
    )
    assert "Strict-Transport-Security" not in client.get("/v1/models")


@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["POST", "GET", "PUT"])
async def test_mcp_answers_have_the_pages_headers(application, page_headers, method):
    reply = await asgi_call(application, method, "/mcp", {"host": "localhost"})  # no credentials: 401

    assert reply.status == 401
    assert {name: reply.headers.get(name.lower()) for name in PAGE_HEADERS} == page_headers


@pytest.mark.asyncio
async def test_mcp_sends_hsts_only_over_tls(application, settings):
    settings.SECURE_HSTS_SECONDS, settings.SECURE_PROXY_SSL_HEADER = 3600, TLS_PROXY
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True

    over_tls = await asgi_call(application, "POST", "/mcp", {"host": "localhost", "x-forwarded-proto": "https"})
    plain = await asgi_call(application, "POST", "/mcp", {"host": "localhost"})

    assert over_tls.headers["strict-transport-security"] == "max-age=3600; includeSubDomains"
    assert "strict-transport-security" not in plain.headers


@pytest.mark.asyncio
async def test_headers_the_mcp_endpoint_sets_itself_are_kept(settings):
    from toolhub.security_headers import with_headers

    async def framed(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-frame-options", b"SAMEORIGIN")]})
        await send({"type": "http.response.body", "body": b""})

    reply = await asgi_call(with_headers(framed), "GET", "/mcp", {"host": "localhost"})

    assert reply.headers["x-frame-options"] == "SAMEORIGIN" and reply.headers["x-content-type-options"] == "nosniff"
