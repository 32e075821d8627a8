"""An OAuth-protected MCP server with its own authorization server, in a thread of the test process.

One origin serves both (as many MCP servers do): RFC 9728 metadata at /.well-known/oauth-protected-resource/mcp,
RFC 8414 metadata, dynamic registration, an authorization endpoint that approves at once (the test plays the
browser: it reads the redirect), a token endpoint (authorization code with PKCE S256, refresh with rotation, client
credentials) and /mcp, which wants a valid bearer token with the required scope. `Upstream.behaviour` makes it
misbehave on purpose: huge or malformed metadata, a token endpoint on another host, short-lived tokens.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import uvicorn
from mcp import types
from mcp.server.lowlevel import Server
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.servers import free_port

CLIENT_ID, CLIENT_SECRET = "preregistered", "preregistered-secret"


@dataclass
class Behaviour:
    access_seconds: int = 3600
    metadata_padding: int = 0  # bytes of padding in the authorization server metadata
    stream_metadata: bool = False  # send it in chunks, without a Content-Length
    malformed_metadata: bool = False
    token_endpoint: str = ""  # another URL to name as the token endpoint
    required_scope: str = "tools"
    refuse_refresh: bool = False
    resource: str = ""  # another resource to name in the protected resource metadata
    refresh_tokens: bool = True  # whether token answers carry a refresh token


@dataclass
class Upstream:
    port: int
    behaviour: Behaviour = field(default_factory=Behaviour)
    clients: dict[str, dict] = field(default_factory=dict)  # client_id -> registration
    codes: dict[str, dict] = field(default_factory=dict)
    access: dict[str, dict] = field(default_factory=dict)  # token -> {"scope", "expires"}
    refresh: dict[str, dict] = field(default_factory=dict)
    grants: list[str] = field(default_factory=list)  # grant_type of every token request, in order
    mcp_authorizations: list[str] = field(default_factory=list)  # Authorization headers /mcp received

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def _issue(self, scope: str) -> dict:
        token, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[token] = {"scope": scope, "expires": time.time() + self.behaviour.access_seconds}
        self.refresh[refresh] = {"scope": scope}
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": self.behaviour.access_seconds,
                  "refresh_token": refresh, "scope": scope}  # fmt: skip
        if not self.behaviour.refresh_tokens:
            del answer["refresh_token"], self.refresh[refresh]
        return answer

    def challenge(self, error: str = "", scope: str | None = None) -> str:
        parts = [f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"',
                 f'scope="{scope or self.behaviour.required_scope}"']  # fmt: skip
        if error:
            parts.insert(0, f'error="{error}"')
        return "Bearer " + ", ".join(parts)

    # The authorization server

    async def resource_metadata(self, request: Request) -> Response:
        return JSONResponse({"resource": self.behaviour.resource or self.url, "authorization_servers": [self.base],
                             "scopes_supported": ["tools", "admin"]})  # fmt: skip

    async def server_metadata(self, request: Request) -> Response:
        if self.behaviour.malformed_metadata:
            return Response('{"issuer": "' + self.base, media_type="application/json")
        metadata = {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": self.behaviour.token_endpoint or f"{self.base}/token",
            "registration_endpoint": f"{self.base}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "scopes_supported": ["tools", "admin"],
        }
        if self.behaviour.metadata_padding:
            metadata["padding"] = "x" * self.behaviour.metadata_padding
        if self.behaviour.stream_metadata:
            body = json.dumps(metadata).encode()
            chunks = (body[start : start + 65536] for start in range(0, len(body), 65536))
            return StreamingResponse(chunks, media_type="application/json")
        return JSONResponse(metadata)

    async def register(self, request: Request) -> Response:
        body = await request.json()
        client_id = f"dyn-{secrets.token_hex(4)}"
        registration = body | {"client_id": client_id, "client_secret": secrets.token_urlsafe(16),
                               "token_endpoint_auth_method": "client_secret_basic"}  # fmt: skip
        self.clients[client_id] = registration
        return JSONResponse(registration, status_code=201)

    async def authorize(self, request: Request) -> Response:
        query = request.query_params
        if query.get("code_challenge_method") != "S256" or query.get("client_id") not in self.clients | {CLIENT_ID: 1}:
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = dict(query)
        answer = {"code": code, "state": query.get("state", ""), "iss": self.base}
        return RedirectResponse(f"{query['redirect_uri']}?{urlencode(answer)}", status_code=302)

    def _client_authenticated(self, request: Request, form) -> str | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        expected = CLIENT_SECRET if client_id == CLIENT_ID else self.clients.get(client_id, {}).get("client_secret")
        return client_id if expected and secrets.compare_digest(secret, expected) else None

    async def token(self, request: Request) -> Response:
        form = await request.form()
        grant = str(form.get("grant_type"))
        self.grants.append(grant)
        client_id = self._client_authenticated(request, form)
        if client_id is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if grant == "authorization_code":
            issued = self.codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if issued is None or issued["code_challenge"] != challenge or form.get("resource") != self.url:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(self._issue(issued.get("scope", "")))
        if grant == "refresh_token":
            held = self.refresh.pop(str(form.get("refresh_token")), None)
            if held is None or self.behaviour.refuse_refresh:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(self._issue(held["scope"]))
        if grant == "client_credentials" and client_id == CLIENT_ID:
            return JSONResponse(self._issue(str(form.get("scope", ""))))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    # The MCP server's guard

    def guard(self, app):
        async def guarded(scope, receive, send):
            if scope["type"] == "http" and scope["path"].startswith("/mcp"):
                header = dict(scope["headers"]).get(b"authorization", b"").decode()
                self.mcp_authorizations.append(header)
                held = self.access.get(header.removeprefix("Bearer "))
                if held is None or held["expires"] < time.time():
                    response = Response(status_code=401, headers={"WWW-Authenticate": self.challenge()})
                    return await response(scope, receive, send)
                if self.behaviour.required_scope not in held["scope"].split():
                    challenge = self.challenge("insufficient_scope")
                    response = Response(status_code=403, headers={"WWW-Authenticate": challenge})
                    return await response(scope, receive, send)
            return await app(scope, receive, send)

        return guarded


def _mcp_server() -> Server:
    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="echo", description="Echoes text.", input_schema=schema)])

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo: {text}")])

    return Server("oauth-upstream", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def start_upstream() -> tuple[Upstream, uvicorn.Server]:
    """Start one in a thread; stop it with `server.should_exit = True`."""
    upstream = Upstream(port=free_port())
    routes = [
        Route("/.well-known/oauth-protected-resource/mcp", upstream.resource_metadata),
        Route("/.well-known/oauth-authorization-server", upstream.server_metadata),
        Route("/register", upstream.register, methods=["POST"]),
        Route("/authorize", upstream.authorize),
        Route("/token", upstream.token, methods=["POST"]),
    ]
    app = _mcp_server().streamable_http_app(host="127.0.0.1", custom_starlette_routes=routes, json_response=True)
    server = uvicorn.Server(uvicorn.Config(upstream.guard(app), host="127.0.0.1", port=upstream.port,
                                           log_level="warning", lifespan="on"))  # fmt: skip
    thread = threading.Thread(target=server.run, name="oauth-upstream", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return upstream, server
