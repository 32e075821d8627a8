"""toolhub as an MCP server: streamable HTTP at /mcp for API-key holders, with deferred loading per session.

A new session lists tool_search and the tools policy loads without a request
(the bundle of a neutral RoutingDecision: always-loaded and non-deferred
tools policy allows). Calling tool_search analyzes the query with the steward,
as the runtime analyzes a user message, searches what that decision allows
(catalog.search) and adds the found tools to this session's list (then sends
notifications/tools/list_changed). A call goes through the runtime's own
checks and execution (agents.tool_calls.execute): the tool must be held by the
bundle of the decision it was exposed under, its arguments must match its
schema, and it runs as a builtin or on its MCP server. A tool that requires
an operator's approval is refused (approval over MCP is not offered).

Never lists or runs a tool that policy denies or that has no policy, and never
serves a request without a valid API key (401), nor one its key's owner or
scopes do not allow (403, agents.mcp_access). A session is bound to the key
that opened it (the SDK answers 404 to another key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from catalog.bundle import CapabilityBundle, LoadedTool, build_bundle
from catalog.decision import RoutingDecision, current_catalog

from . import mcp_access
from .api_keys import authenticate
from .models import ModelProfile
from .providers import ToolCall
from .router import StewardContext, analyze
from .tool_calls import CallOutcome, execute, refusal_reason, run_tool_search, schema_problem

logger = logging.getLogger(__name__)

SERVER_NAME = "toolhub"
SESSION_IDLE_SECONDS = 30 * 60  # the SDK's default; a session's loaded tools are forgotten with it
NEUTRAL = RoutingDecision()  # no request yet: what policy allows with no intent, outside any workflow
DEFAULT_RESULT_TOKENS = 1024


@dataclass
class SessionTools:
    """What one MCP session has loaded through tool_search: tool name -> the decision it was found under."""

    found: dict[str, RoutingDecision] = field(default_factory=dict)
    used_at: float = field(default_factory=time.monotonic)


class Sessions:
    """Loaded tools per MCP session id, forgotten once the session has been idle as long as the SDK keeps it."""

    def __init__(self, idle_seconds: float = SESSION_IDLE_SECONDS):
        self.idle_seconds = idle_seconds
        self._by_id: dict[str, SessionTools] = {}

    def get(self, session_id: str | None) -> SessionTools:
        now = time.monotonic()
        for stale in [key for key, state in self._by_id.items() if now - state.used_at > self.idle_seconds]:
            del self._by_id[stale]
        if session_id is None:  # a request outside any session (stateless): nothing stays loaded
            return SessionTools()
        state = self._by_id.setdefault(session_id, SessionTools())
        state.used_at = now
        return state


# --- what a session sees and may call (sync: ORM and the runtime's code) ---------------------------


class _Bundles:
    """Bundles built from the process's current catalog, kept until the catalog changes (it is rebuilt then)."""

    MAX = 256

    def __init__(self):
        self._entries: tuple | None = None
        self._built: dict[tuple, CapabilityBundle] = {}
        self._lock = threading.Lock()  # calls run on several threads

    def get(self, decision: RoutingDecision, recommended: tuple[str, ...] = ()) -> CapabilityBundle:
        entries = current_catalog()  # the same tuple while the catalog state stays the same
        with self._lock:
            if entries is not self._entries or len(self._built) > self.MAX:
                self._entries, self._built = entries, {}
            key = (decision, recommended)
            if key not in self._built:
                self._built[key] = build_bundle(decision, entries, recommended=recommended)
            return self._built[key]


_bundles = _Bundles()


def session_tools(found: dict[str, RoutingDecision]) -> list[LoadedTool]:
    """The session's tool list: the neutral bundle's loaded tools, then found ones policy still allows."""
    tools = {tool.name: tool for tool in _bundles.get(NEUTRAL).loaded}
    by_decision: dict[RoutingDecision, list[str]] = defaultdict(list)
    for name, decision in found.items():
        by_decision[decision].append(name)
    for decision, names in by_decision.items():
        for tool in _bundles.get(decision, tuple(sorted(names))).loaded:
            if tool.name in names:
                tools.setdefault(tool.name, tool)
    return list(tools.values())


def _bundle_for(name: str, found: dict[str, RoutingDecision]) -> CapabilityBundle:
    """The bundle a call of `name` is checked against: the neutral one, or the one of the search that found it."""
    neutral = _bundles.get(NEUTRAL)
    if neutral.holds(name) or name not in found:
        return neutral
    return _bundles.get(found[name], (name,))


def result_token_limit() -> int:
    profile = ModelProfile.objects.filter(name=settings.TOOLHUB_MODEL_PROFILE).only("reserved_result_tokens").first()
    return profile.reserved_result_tokens if profile else DEFAULT_RESULT_TOKENS


def _ignore_status(*args, **kwargs) -> None:
    """Tool status events go to a conversation's stream; an MCP session has none."""


def search_tools(arguments: dict, found: dict[str, RoutingDecision]) -> CallOutcome:
    """tool_search over MCP: the steward's decision for the query decides what may be found and loaded."""
    search = settings.TOOLHUB_SEARCH_TOOL
    neutral = _bundles.get(NEUTRAL)
    reason = refusal_reason(search, neutral)
    if reason:
        return CallOutcome(content=json.dumps({"error": reason}), is_error=True, refused=True)
    definition = next(tool.definition for tool in neutral.loaded if tool.name == search)
    problem = schema_problem(arguments, definition["function"]["parameters"])
    if problem:
        return CallOutcome(content=json.dumps({"error": problem}), is_error=True)
    context = StewardContext.current()
    analysis = analyze(arguments["query"], context=context)
    bundle = build_bundle(analysis.decision, context.entries, recommended=analysis.recommended_tools)
    outcome = run_tool_search(arguments, bundle, emit=_ignore_status)
    for name in outcome.found:
        found.setdefault(name, analysis.decision)
    return outcome


def call(name: str, arguments: dict, found: dict[str, RoutingDecision]) -> CallOutcome:
    """One tools/call: the runtime's checks and execution, against the bundle the tool was exposed under."""
    if name == settings.TOOLHUB_SEARCH_TOOL:
        return search_tools(arguments, found)
    bundle = _bundle_for(name, found)
    tool_call = ToolCall(id=f"mcp-{time.monotonic_ns()}", name=name, arguments=json.dumps(arguments))
    outcome = execute(tool_call, bundle, emit=_ignore_status, max_result_tokens=result_token_limit())
    if outcome.refused and any(tool.name == name and tool.requires_confirmation for tool in bundle.loaded):
        message = (
            f"{name} requires an operator's approval before it runs, and approval is not offered over MCP; "
            "it was not run. Ask for it through the toolhub console or the chat API instead."
        )
        return CallOutcome(content=json.dumps({"error": message}), is_error=True, refused=True)
    return outcome


# --- the MCP server (async: the SDK's handlers) -----------------------------------------------------


def _mcp_tool(tool: LoadedTool) -> types.Tool:
    function = tool.definition["function"]
    return types.Tool(name=function["name"], description=function["description"], input_schema=function["parameters"])


class _ToolhubServer(Server):
    def create_initialization_options(self, notification_options=None, *args, **kwargs):
        # The tool list changes when tool_search loads tools; clients are told so.
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


def build_server(sessions: Sessions) -> Server:
    def session_of(ctx) -> SessionTools:
        request = ctx.request
        session_id = request.headers.get(MCP_SESSION_ID_HEADER) if request is not None else None
        return sessions.get(session_id)

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        state = session_of(ctx)
        tools = await sync_to_async(session_tools)(dict(state.found))
        return types.ListToolsResult(tools=[_mcp_tool(tool) for tool in tools])

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        state = session_of(ctx)
        before = len(state.found)
        # Not thread-sensitive: a slow MCP tool must not hold up every other ORM call of this process.
        outcome = await sync_to_async(call, thread_sensitive=False)(params.name, params.arguments or {}, state.found)
        if len(state.found) > before:
            await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.content)], is_error=outcome.is_error
        )

    return _ToolhubServer(
        SERVER_NAME,
        version="1.0",
        instructions=(
            f"toolhub's tool catalog, filtered by policy. Call {settings.TOOLHUB_SEARCH_TOOL} with what you need "
            "to load more tools; the tool list then changes."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


# --- the ASGI app mounted at /mcp ------------------------------------------------------------------


async def _send_json(send, status: int, payload: dict, headers: tuple = ()) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                        *headers],
        }
    )  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _allowed_host(headers: dict[bytes, bytes]) -> bool:
    domain, _port = split_domain_port(headers.get(b"host", b"").decode("latin-1"))
    allowed = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    return bool(domain) and validate_host(domain, allowed)


class McpEndpoint:
    """ASGI app for /mcp: checks the host and the API key, then hands the request to the SDK's session manager.

    Daphne sends no lifespan events, so the session manager is started on the first request, in a task that
    lives as long as the process.
    """

    def __init__(self):
        self.sessions = Sessions()
        self.server = build_server(self.sessions)
        self.manager = StreamableHTTPSessionManager(app=self.server, session_idle_timeout=SESSION_IDLE_SECONDS)
        self._started: asyncio.Event | None = None
        self._runner: asyncio.Task | None = None

    async def _run_manager(self) -> None:
        async with self.manager.run():
            self._started.set()
            await asyncio.Event().wait()

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run_manager())
        await self._started.wait()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return
        headers = dict(scope.get("headers", ()))
        if not _allowed_host(headers):
            await _send_json(send, 400, {"error": "Host not allowed."})
            return
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if not auth.startswith("Bearer "):
            await _send_json(send, 401, {"error": "Missing API key: send Authorization: Bearer <key>."},
                             headers=((b"www-authenticate", b"Bearer"),))  # fmt: skip
            return
        api_key = await sync_to_async(authenticate)(auth.removeprefix("Bearer ").strip())
        if api_key is None:
            await _send_json(send, 401, {"error": "Invalid API key."}, headers=((b"www-authenticate", b"Bearer"),))
            return
        denial, receive = await mcp_access.check(api_key, scope, receive)  # 403: the key's owner or scopes
        if denial is not None:
            await _send_json(send, denial.status, denial.payload, headers=denial.headers)
            return
        await self._ensure_started()
        principal = AccessToken(token="api-key", client_id=f"toolhub-api-key-{api_key.pk}", scopes=api_key.scopes)
        scope = {**scope, "user": AuthenticatedUser(principal)}
        await self.manager.handle_request(scope, receive, send)


def path_router(django_app, mcp_app, path: str = "/mcp"):
    """HTTP requests for `path` (exactly, or with a trailing slash) go to `mcp_app`; everything else to Django."""

    async def route(scope, receive, send):
        if scope["type"] == "http" and scope["path"].rstrip("/") == path:
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return route
