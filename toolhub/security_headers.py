"""The security headers Django's middleware gives the pages and /v1, for ASGI apps served outside it (/mcp, /healthz).

Django's SecurityMiddleware and XFrameOptionsMiddleware add, from the settings: X-Content-Type-Options (nosniff),
X-Frame-Options (DENY), Referrer-Policy, Cross-Origin-Opener-Policy and, on a request that came over TLS
(directly, or through a proxy that says so: TOOLHUB_BEHIND_TLS_PROXY), Strict-Transport-Security. `with_headers`
adds the same, read from the same settings, to every HTTP response of the app it wraps, unless the app set one
itself. The Content-Security-Policy is toolhub.csp's. Never changes a status or a body.
"""

import io

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest


def strict_transport_security() -> str:
    value = f"max-age={settings.SECURE_HSTS_SECONDS}"
    if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
        value += "; includeSubDomains"
    if settings.SECURE_HSTS_PRELOAD:
        value += "; preload"
    return value


def security_headers(*, secure: bool) -> dict[str, str]:
    """The headers SecurityMiddleware and XFrameOptionsMiddleware add with the current settings."""
    headers = {}
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers["X-Content-Type-Options"] = "nosniff"
    if settings.X_FRAME_OPTIONS:
        headers["X-Frame-Options"] = settings.X_FRAME_OPTIONS
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        headers["Referrer-Policy"] = policy if isinstance(policy, str) else ",".join(policy)
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers["Cross-Origin-Opener-Policy"] = settings.SECURE_CROSS_ORIGIN_OPENER_POLICY
    if secure and settings.SECURE_HSTS_SECONDS:
        headers["Strict-Transport-Security"] = strict_transport_security()
    return headers


def with_headers(app):
    """An ASGI app that answers as `app` does, with security_headers on each HTTP response that lacks them."""

    async def respond(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        # Django's own answer to "did this come over TLS", SECURE_PROXY_SSL_HEADER included.
        headers = security_headers(secure=ASGIRequest(scope, io.BytesIO()).is_secure())

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _value in message.get("headers", ())}
                added = [(name.lower().encode(), value.encode()) for name, value in headers.items()
                         if name.lower().encode() not in present]  # fmt: skip
                message = {**message, "headers": [*message.get("headers", ()), *added]}
            await send(message)

        return await app(scope, receive, send_with_headers)

    return respond
