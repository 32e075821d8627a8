"""ASGI entry point: HTTP through Django (but /mcp: toolhub's MCP server, and /healthz: the balancer's check),
WebSockets through Channels.

Served by Daphne, whose HTTP parser answers a request line or headers over its limits with 414 or 431
(toolhub.header_limits) instead of dropping the connection.

WebSocket connections pass the allowed-hosts origin check and carry the
Django session user (AuthMiddlewareStack); consumers check permissions.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

# Django must be set up before anything imports models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agents.console.websocket_urls import websocket_urlpatterns  # noqa: E402
from agents.mcp_gateway.server import McpEndpoint, path_router  # noqa: E402
from agents.router import warm_up_in_background  # noqa: E402
from toolhub import header_limits, security_headers, tracing  # noqa: E402
from toolhub.csp import with_policy  # noqa: E402
from toolhub.health import HEALTH_PATH, healthz  # noqa: E402
from toolhub.log_context import with_request_context  # noqa: E402

header_limits.install()

application = ProtocolTypeRouter(
    {
        # /mcp and /healthz are routed by path before Django: the MCP SDK serves /mcp (streamable HTTP, API key
        # auth), with the security headers and policy Django's middleware gives the pages.
        # Every HTTP request is bound to its request id, trace id and channel for what it logs (toolhub.log_context),
        # and, with traces on, is a span that joins the caller's `traceparent` and lasts the whole (streamed) answer.
        "http": with_request_context(
            tracing.asgi_app(
                path_router(
                    path_router(
                        django_asgi_app, security_headers.with_headers(with_policy(McpEndpoint())), path="/mcp"
                    ),
                    healthz,
                    path=HEALTH_PATH,
                )
            )
        ),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# Load the embedding model, build the search and example indexes now, not on the first request.
warm_up_in_background()
