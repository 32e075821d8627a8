"""CORS for the endpoints a browser-based MCP client calls on another origin: the OAuth metadata, client
registration, token and revocation endpoints (agents/mcp_gateway/oauth_urls.py wraps each in `any_origin`).

Any origin may call them and read the answer, because none of them acts on a
cookie: the client proves itself with its registration, PKCE verifier or
token. A preflight (OPTIONS with Access-Control-Request-Method) is answered 204
with the methods and headers such a client sends, without running the view.
Never sends Access-Control-Allow-Credentials, so a browser never sends or
exposes cookies across origins here; never wraps a page or the authorization
endpoint (a browser navigates to those; it does not fetch them).
"""

import functools

from django.http import HttpResponse

ALLOWED_METHODS = "GET, POST, OPTIONS"
ALLOWED_HEADERS = "Authorization, Content-Type, MCP-Protocol-Version"
PREFLIGHT_MAX_AGE = "86400"


def any_origin(view):
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method == "OPTIONS" and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in request.META:
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = ALLOWED_METHODS
            response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response["Access-Control-Max-Age"] = PREFLIGHT_MAX_AGE
        else:
            response = view(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        return response

    return wrapped
