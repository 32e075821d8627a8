"""/healthz: the load balancer's check that this ASGI process serves requests (deploy/haproxy.cfg).

Answered before Django (no middleware, no host check, no database): it says the process accepts connections
and its event loop runs, which is what a balancer needs to route around a dead or stuck process. The database
and Redis are shared by every process, so a check of theirs would take all of them out at once. Its answer carries
the security headers and policy the pages get (toolhub.security_headers, toolhub.csp), read from the settings.
Never reads or writes state.
"""

from toolhub.csp import with_policy
from toolhub.security_headers import with_headers

HEALTH_PATH = "/healthz"


async def _answer(scope, receive, send):
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")],
        }
    )
    await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else b"ok\n"})


healthz = with_headers(with_policy(_answer))
