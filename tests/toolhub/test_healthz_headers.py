"""/healthz, answered before Django, carries the security headers and policy the pages get, and HSTS only over TLS
(toolhub.health). /v1 gets them from Django's middleware: tests/toolhub/test_security_headers.py."""

import pytest

from tests.support.mcp_asgi import asgi_call

PAGE_HEADERS = ("X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Cross-Origin-Opener-Policy",
                "Content-Security-Policy")  # fmt: skip
TLS_PROXY = ("HTTP_X_FORWARDED_PROTO", "https")  # what TOOLHUB_BEHIND_TLS_PROXY=1 sets


@pytest.fixture
def application(monkeypatch):
    """toolhub.asgi's application as Daphne serves it (without loading the search models at import)."""
    monkeypatch.setattr("agents.router.warm_up_in_background", lambda: None)
    from toolhub.asgi import application

    return application


@pytest.mark.django_db
@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_healthz_answers_with_the_pages_headers(application, async_client, method):
    page = await async_client.get("/login/")
    reply = await asgi_call(application, method, "/healthz", {"host": "localhost"})

    assert reply.status == 200
    page_headers = {name: page[name] for name in PAGE_HEADERS}
    assert {name: reply.headers.get(name.lower()) for name in PAGE_HEADERS} == page_headers
    assert reply.headers["x-content-type-options"] == "nosniff" and reply.headers["x-frame-options"] == "DENY"
    assert reply.headers["cache-control"] == "no-store"


@pytest.mark.asyncio
async def test_healthz_sends_hsts_only_over_tls(application, settings):
    settings.SECURE_HSTS_SECONDS, settings.SECURE_PROXY_SSL_HEADER = 3600, TLS_PROXY

    over_tls = await asgi_call(application, "GET", "/healthz", {"host": "localhost", "x-forwarded-proto": "https"})
    plain = await asgi_call(application, "GET", "/healthz", {"host": "localhost"})

    assert over_tls.headers["strict-transport-security"] == "max-age=3600"
    assert "strict-transport-security" not in plain.headers
