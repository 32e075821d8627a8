"""The Content-Security-Policy header on every response: dashboard pages, /v1 and (through the ASGI wrapper) /mcp.

The policy is settings.TOOLHUB_CONTENT_SECURITY_POLICY (env TOOLHUB_CSP): by default
scripts, styles, fonts and connections from this origin only ('self' also covers
ws:/wss: to this host, the console's WebSocket), images and audio also as data:
URLs (MCP results), no plugins, no framing. Never allows inline scripts or styles:
templates load static/ files, htmx is told not to inject its indicator style
(templates/base.html's htmx-config). An empty policy sends no header; nor do
Django's debug error pages (DEBUG only), which need their inline code.
"""

from django.conf import settings

HEADER = "Content-Security-Policy"
REPORT_ONLY_HEADER = "Content-Security-Policy-Report-Only"


def header_name() -> str:
    return REPORT_ONLY_HEADER if settings.TOOLHUB_CSP_REPORT_ONLY else HEADER


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = settings.TOOLHUB_CONTENT_SECURITY_POLICY
        if not policy or HEADER in response or REPORT_ONLY_HEADER in response or is_debug_page(response):
            return response
        response[header_name()] = policy
        return response


def with_form_action(policy: str, source: str) -> str:
    """`policy` with `source` added to its form-action: for a page whose form's answer redirects there (OAuth
    consent redirects to its client). A policy without form-action restricts no form and stays as it is."""
    directives = [directive.strip() for directive in policy.split(";") if directive.strip()]
    return "; ".join(
        f"{directive} {source}" if directive.split()[0].lower() == "form-action" else directive
        for directive in directives
    )


def is_debug_page(response) -> bool:
    """Django's technical 404 and 500 pages (DEBUG only) style and script inline: left without a policy."""
    return settings.DEBUG and response.status_code >= 400 and response.get("Content-Type", "").startswith("text/html")


def with_policy(app):
    """An ASGI app that answers as `app` does, with the policy header on its HTTP responses (for /mcp)."""

    async def respond(scope, receive, send):
        policy = settings.TOOLHUB_CONTENT_SECURITY_POLICY
        if scope["type"] != "http" or not policy:
            return await app(scope, receive, send)

        async def send_with_policy(message):
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (header_name().lower().encode(), policy.encode())]
                message = {**message, "headers": headers}
            await send(message)

        return await app(scope, receive, send_with_policy)

    return respond
