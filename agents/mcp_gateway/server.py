"""toolhub as an MCP server: streamable HTTP at /mcp for API-key holders, with deferred loading per API key.

A session lists tool_search, the tools policy loads without a request (the
bundle of a neutral RoutingDecision: always-loaded and non-deferred tools
policy allows), and what its API key found through tool_search in the last
TOOLHUB_MCP_FOUND_TTL seconds, in any session (agents.mcp_gateway.found_tools: stateless
clients open a session per call); a key for clients that never search (ApiKey.lists_every_permitted_tool) lists
every tool it may call, up to TOOLHUB_MCP_LIST_ALL_TOKENS schema tokens. Calling tool_search analyzes the query with
the steward, as the runtime analyzes a user message, searches what that
decision allows (catalog.search.service), remembers the found tools for the key and
sends notifications/tools/list_changed. A tool named in tools/call is decided by its
policy (agents.mcp_gateway.direct_calls), never by the router's reading of a request: listed
or not, found or not, it runs when policy permits it; loading is about context, not
permission. One whose policy requires confirmation waits for an approval
(agents.mcp_gateway.call_approvals). A call goes through the runtime's own checks and
execution (agents.turns.tool_calls.execute): its arguments must match its schema (an
isError result says how they do not), and it runs as a builtin or on its MCP server. A call of an MCP tool that
policy permits with no approval and whose arguments pass is planned while the request is admitted, in the same hop
to the database's thread (`plan_call`), and then awaited on the event loop: no worker thread waits for it. An MCP
tool's answer passes on as its server sent it (every content block, structuredContent; text cut to the result
budget); listings carry its title, outputSchema and annotations.
Resources, resource templates, prompts and completions of the imported servers
are relayed by agents.mcp_gateway.resources (which servers offer them: its docstring),
subscriptions to their resources by agents.mcp_gateway.subscriptions, a call's
progress and log messages by agents.mcp_gateway.progress, and its server's elicitation and
sampling requests by agents.mcp_gateway.client_requests. A call to an MCP server is made for
the key's user and this session (catalog.mcp_client.callers), which choose the upstream
connection when the server's connections are per user or per session.

Never lists or runs a tool that policy denies or that has no policy: an unknown
or denied tool, or a call whose approval was denied or not given in time, is a
JSON-RPC error (-32602) naming the rule. Never serves a request without a
valid API key or OAuth access token (401 naming the OAuth resource metadata:
agents.mcp_gateway.oauth), nor one its key's owner or scopes do not allow (403,
agents.mcp_gateway.access), nor one past its key's or owner's rate limit (429 with
Retry-After, toolhub.rate_limits), nor a body past agents.mcp_gateway.body_limits's bounds
(413 or 400 with a JSON-RPC error). A session is bound to the key that opened
it (the SDK answers 404 to another key). When the database pool has no
connection in time, a request is answered 503 with Retry-After and a JSON-RPC
error, and a tool call a JSON-RPC error saying to retry; never a 500. Every
database access goes through database_sync_to_async, so a session's open stream
holds no connection.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass

import mcp_types as types
from channels.db import database_sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

from agents.models import ApiKey, ModelProfile
from agents.providers import ToolCall
from agents.router import StewardContext, analyze
from agents.tools.results import truncate_blocks
from agents.turns.tool_calls import (
    CallOutcome,
    execute,
    execute_on_server,
    refusal_reason,
    run_tool_search,
    schema_problem,
)
from catalog.mcp_client.callers import Caller, calling_as
from catalog.mcp_client.client import observing
from catalog.mcp_client.sync import mcp_route
from catalog.models import McpServer
from catalog.policies.bundle import CapabilityBundle, LoadedTool, build_bundle, loaded_tool
from catalog.policies.decision import CatalogEntry, RoutingDecision, current_catalog, derived, entries_by_name
from catalog.search.service import catalog_state, one_catalog_state
from toolhub.db_pool import RETRY_AFTER_SECONDS, unavailable_message

from . import access as mcp_access
from . import call_approvals, direct_calls, oauth
from . import resources as mcp_resources
from . import subscriptions as mcp_subscriptions
from .access import TOOLS_CALL
from .body_limits import McpInputRejected
from .call_approvals import ApprovalNeeded
from .client_requests import ClientAsker
from .direct_calls import ToolRefused
from .event_store import EventBudget, ResumableSessions
from .found_tools import found_tools, remember_found
from .progress import CallRelay, on_set_logging_level

logger = logging.getLogger(__name__)

SERVER_NAME = "toolhub"
SESSION_IDLE_SECONDS = 30 * 60  # the SDK's default
API_KEY_SCOPE = "toolhub.api_key_id"  # the ASGI scope key under which the endpoint passes the caller's key on
KEY_USER_SCOPE = "toolhub.api_key_user_id"  # and the user that key acts for
PLANNED_CALL_SCOPE = "toolhub.planned_call"  # and the PlannedCall of the tools/call its POST carries, if any
NEUTRAL = RoutingDecision()  # no request yet: what policy allows with no intent, outside any workflow
DEFAULT_RESULT_TOKENS = 1024
SERVER_BUSY = -32050  # JSON-RPC implementation-defined server error: no database connection in time (HTTP 503)


# --- what a session sees and may call (sync: ORM and the runtime's code) ---------------------------


def _bundle(decision: RoutingDecision, recommended: tuple[str, ...] = ()) -> CapabilityBundle:
    """A bundle of the process's current catalog, built once per catalog (catalog.policies.decision.derived)."""
    entries = current_catalog()  # the same tuple while the catalog state stays the same
    return derived.get(
        entries, ("mcp bundle", decision, recommended), lambda: build_bundle(decision, entries, recommended=recommended)
    )


def _entry(name: str) -> CatalogEntry | None:
    return entries_by_name(current_catalog()).get(name)


def session_tools(found: dict[str, RoutingDecision], *, every_permitted: bool = False) -> list[LoadedTool]:
    """A session's tool list: the neutral bundle's loaded tools, then what its key found that policy still allows.

    `every_permitted` (a key for clients that never search, ApiKey.lists_every_permitted_tool): then every other
    tool a direct call may run, by name, while the list stays within TOOLHUB_MCP_LIST_ALL_TOKENS schema tokens."""
    tools = {tool.name: tool for tool in _bundle(NEUTRAL).loaded}
    if every_permitted:
        budget = settings.TOOLHUB_MCP_LIST_ALL_TOKENS - sum(tool.schema_tokens for tool in tools.values())
        for entry in sorted(current_catalog(), key=lambda entry: entry.name):
            if entry.name in tools or direct_calls.refusal(entry.name, entry) is not None:
                continue
            tool = loaded_tool(entry)
            if tool.schema_tokens <= budget:
                tools[tool.name] = tool
                budget -= tool.schema_tokens
    by_decision: dict[RoutingDecision, list[str]] = defaultdict(list)
    for name, decision in found.items():
        by_decision[decision].append(name)
    for decision, names in by_decision.items():
        for tool in _bundle(decision, tuple(sorted(names))).loaded:
            if tool.name in names:
                tools.setdefault(tool.name, tool)
    return list(tools.values())


_result_tokens: tuple[tuple[int, str], int] | None = None


def result_token_limit() -> int:
    """The default model profile's tokens kept for a tool's result: the most of a result /mcp passes on. Read once
    per catalog state (a profile's save moves it: agents.apps); keyed on the state itself, not on the catalog tuple
    (catalog.policies.decision.derived), since an empty catalog is the same tuple in every state."""
    global _result_tokens
    state = catalog_state()
    cached = _result_tokens
    if cached is None or cached[0] != state:
        profile = ModelProfile.objects.filter(name=settings.TOOLHUB_MODEL_PROFILE).only("reserved_result_tokens")
        first = profile.first()
        cached = (state, first.reserved_result_tokens if first else DEFAULT_RESULT_TOKENS)
        _result_tokens = cached
    return cached[1]


def _ignore_status(*args, **kwargs) -> None:
    """Tool status events go to a conversation's stream; an MCP session has none."""


def search_tools(arguments: dict, api_key_id: int) -> CallOutcome:
    """tool_search over MCP: the steward's decision for the query decides what may be found; the key keeps it."""
    search = settings.TOOLHUB_SEARCH_TOOL
    neutral = _bundle(NEUTRAL)
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
    remember_found(api_key_id, outcome.found, analysis.decision)
    return outcome


def call(
    name: str, arguments: dict, api_key_id: int, *, max_result_tokens: int | None = None, approval_id: int | None = None
) -> CallOutcome:
    """One tools/call, decided by the tool's policy (agents.mcp_gateway.direct_calls), then the runtime's checks and
    execution. `approval_id`: the decided approval a call that requires confirmation runs under.

    Raises ToolRefused when the tool is not run for a reason that is not the arguments' or the tool's own, and
    ApprovalNeeded (an approval was asked) when its policy requires confirmation and no approval is given.
    """
    if name == settings.TOOLHUB_SEARCH_TOOL:
        outcome = search_tools(arguments, api_key_id)
        if outcome.refused:
            raise ToolRefused(json.loads(outcome.content)["error"])
        return outcome
    entry = _entry(name)
    reason = direct_calls.refusal(name, entry)
    if reason:
        raise ToolRefused(reason)
    bundle = direct_calls.bundle_holding(_bundle(NEUTRAL), entry)
    budget = max_result_tokens or result_token_limit()
    if not direct_calls.requires_approval(entry):
        tool_call = ToolCall(id=f"mcp-{time.monotonic_ns()}", name=name, arguments=json.dumps(arguments))
        outcome = execute(tool_call, bundle, emit=_ignore_status, max_result_tokens=budget)
        if outcome.refused:
            raise ToolRefused(json.loads(outcome.content)["error"])
        return outcome
    problem = schema_problem(arguments, entry.input_schema)  # before a person is asked to approve a call that fails
    if problem:
        return CallOutcome(content=json.dumps({"error": problem}), is_error=True)
    if approval_id is None:
        raise call_approvals.ask(name=name, arguments=arguments, api_key_id=api_key_id, risk=entry.policy.risk)
    approval, message_id = call_approvals.claim(approval_id, name=name, arguments=arguments, api_key_id=api_key_id)
    tool_call = ToolCall(id=approval.tool_call_id, name=name, arguments=json.dumps(arguments))
    outcome = execute(tool_call, bundle, emit=_ignore_status, max_result_tokens=budget, approved=True)
    call_approvals.settle(approval, message_id, outcome)
    return outcome


@dataclass(frozen=True)
class PlannedCall:
    """A tools/call that needs nothing more of the database to run (`plan_call`): policy permits its tool with no
    approval, its arguments match the tool's schema, its MCP server's row and the result budget are read."""

    request_id: object
    name: str
    arguments: dict
    route: tuple[McpServer, str]  # catalog.mcp_client.sync.mcp_route
    budget: int

    def answers(self, request_id, params: types.CallToolRequestParams) -> bool:
        """Whether this is the plan of the request the SDK hands over (its id, tool and arguments)."""
        return (request_id, params.name, params.arguments or {}) == (self.request_id, self.name, self.arguments)


def plan_call(message) -> PlannedCall | None:
    """The plan of `message` (a POST's JSON-RPC message) when it is one tools/call that `call` would run on an MCP
    server with no approval: None for anything else (a batch, tool_search, a builtin, a refusal, an approval, bad
    arguments), which `call` then decides as always, with its errors and its approvals."""
    params = message.get("params") if isinstance(message, dict) and message.get("method") == TOOLS_CALL else None
    if not isinstance(params, dict):
        return None
    name, arguments = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict) or name == settings.TOOLHUB_SEARCH_TOOL:
        return None
    with one_catalog_state():
        entry = _entry(name)
        if direct_calls.refusal(name, entry) is not None or direct_calls.requires_approval(entry):
            return None
        route = mcp_route(name) if schema_problem(arguments, entry.input_schema) is None else None
        return PlannedCall(message.get("id"), name, arguments, route, result_token_limit()) if route else None


async def run_planned(planned: PlannedCall, relay: CallRelay, caller: Caller) -> CallOutcome:
    """A planned call, awaited on the event loop: the MCP client's loop runs it, no worker thread waits for it."""
    tool_call = ToolCall(id=f"mcp-{time.monotonic_ns()}", name=planned.name, arguments=json.dumps(planned.arguments))
    with observing(relay.observer), calling_as(caller):
        return await execute_on_server(tool_call, planned.route, planned.arguments, emit=_ignore_status,
                                       max_result_tokens=planned.budget)  # fmt: skip


def call_result(outcome: CallOutcome, max_tokens: int) -> types.CallToolResult:
    """What /mcp answers: an MCP tool's result as its server sent it (text cut to the budget), else the text."""
    if outcome.result is None:
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.content)],
                                    is_error=outcome.is_error)  # fmt: skip
    blocks, _cut = truncate_blocks(outcome.result["content"], max_tokens)
    return types.CallToolResult.model_validate(
        {"content": blocks, "structuredContent": outcome.result.get("structuredContent"), "isError": outcome.is_error}
    )


# --- the MCP server (async: the SDK's handlers) -----------------------------------------------------


def _mcp_tool(tool: LoadedTool) -> types.Tool:
    function = tool.definition["function"]
    entry = _entry(tool.name)
    return types.Tool.model_validate(
        {
            "name": function["name"],
            "title": (entry.title if entry else "") or None,
            "description": function["description"],
            "inputSchema": function["parameters"],
            "outputSchema": entry.output_schema if entry else None,
            "annotations": entry.annotations if entry else None,
        }
    )


class _ToolhubServer(Server):
    def create_initialization_options(self, notification_options=None, *args, **kwargs):
        # The tool list changes when tool_search loads tools, resources and prompts when a server says so.
        options = notification_options or NotificationOptions(
            tools_changed=True, resources_changed=True, prompts_changed=True
        )
        return super().create_initialization_options(options, *args, **kwargs)


def _caller(ctx) -> int:
    """The id of the API key the request came with (the endpoint checked it and put it in the scope)."""
    return ctx.request.scope[API_KEY_SCOPE]


def build_server() -> Server:
    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        def listing() -> list[types.Tool]:
            key = _caller(ctx)
            every = ApiKey.objects.filter(pk=key, lists_every_permitted_tool=True).exists()
            return [_mcp_tool(tool) for tool in session_tools(found_tools(key), every_permitted=every)]

        return types.ListToolsResult(tools=await database_sync_to_async(listing)())

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = _caller(ctx)
        relay = CallRelay(ctx)  # the MCP server's progress and log messages for this call go to this client
        asker = ClientAsker(ctx)  # and its elicitation and sampling requests

        user_id = ctx.request.scope[KEY_USER_SCOPE]
        planned = ctx.request.scope.get(PLANNED_CALL_SCOPE)
        if planned is not None and planned.answers(ctx.request_id, params):  # the admission's hop read what it needs
            try:
                return call_result(await run_planned(planned, relay, asker.caller(user_id)), planned.budget)
            finally:
                await relay.flush()

        def run(approval_id: int | None = None) -> tuple[CallOutcome, bool, int]:
            before = set(found_tools(key)) if params.name == settings.TOOLHUB_SEARCH_TOOL else set()
            # One reading of the catalog's state for the call: the budget, the bundle, its entry and the tool's route.
            with one_catalog_state(), observing(relay.observer), calling_as(asker.caller(user_id)):
                budget = result_token_limit()
                outcome = call(params.name, params.arguments or {}, key, max_result_tokens=budget,
                               approval_id=approval_id)  # fmt: skip
            return outcome, bool(set(outcome.found) - before), budget

        try:
            # Not thread-sensitive: a slow MCP tool must not hold up every other ORM call of this process.
            try:
                outcome, newly_found, budget = await database_sync_to_async(run, thread_sensitive=False)()
            except ApprovalNeeded as needed:  # the call waits for a person's decision, then runs if approved
                await relay.announce(str(needed))
                await call_approvals.wait_for_decision(needed.approval_id)
                outcome, newly_found, budget = await database_sync_to_async(run, thread_sensitive=False)(
                    needed.approval_id
                )
        except ToolRefused as refused:
            raise MCPError(code=types.INVALID_PARAMS, message=str(refused)) from None
        except Exception as error:
            message = unavailable_message(error)
            if message is None:
                raise
            raise MCPError(code=SERVER_BUSY, message=message) from None
        finally:
            await relay.flush()
        if newly_found:
            await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
        return call_result(outcome, budget)

    server = _ToolhubServer(
        SERVER_NAME,
        version="1.0",
        instructions=(
            f"toolhub's tool catalog, filtered by policy. Call {settings.TOOLHUB_SEARCH_TOOL} with what you need "
            "to load more tools; the tool list then changes. Resources and prompts are those of the MCP servers "
            "toolhub imports whose tools policy allows; a prompt keeps its server's name, or is "
            "<server prefix>__<name> when an earlier server has a prompt of that name."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=mcp_resources.on_list_resources,
        on_list_resource_templates=mcp_resources.on_list_resource_templates,
        on_read_resource=mcp_resources.on_read_resource,
        on_subscribe_resource=mcp_subscriptions.on_subscribe_resource,
        on_unsubscribe_resource=mcp_subscriptions.on_unsubscribe_resource,
        on_list_prompts=mcp_resources.on_list_prompts,
        on_get_prompt=mcp_resources.on_get_prompt,
        on_completion=mcp_resources.on_completion,
    )
    # Registered this way, not as on_set_logging_level, which warns that logging is deprecated from 2026-07-28:
    # clients of the earlier versions still set their level (agents.mcp_gateway.progress).
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, on_set_logging_level)
    return server


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
    """ASGI app for /mcp: checks the host, the credential, its rate limits and rights and the body
    (agents.mcp_gateway.body_limits),
    then hands the request to the SDK's session manager; 503 with Retry-After when the pool has no connection in time.

    Daphne sends no lifespan events, so the session manager is started on the first request, in a task that
    lives as long as the process.
    """

    def __init__(self):
        self.server = build_server()
        budget = settings.TOOLHUB_MCP_EVENT_BUFFER_BYTES
        self.manager = ResumableSessions(
            self.server,
            budget=EventBudget(budget) if budget else None,
            retry_interval=settings.TOOLHUB_MCP_SSE_RETRY_MS or None,
            session_idle_timeout=SESSION_IDLE_SECONDS,
        )
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
        try:
            checked = await self._checked(scope, receive, send)
        except McpInputRejected as rejected:  # agents.mcp_gateway.body_limits: size, JSON, depth, batch, strings
            await _send_json(send, rejected.status, rejected.payload())
            return
        except Exception as error:
            message = unavailable_message(error)
            if message is None:
                raise
            await _send_json(send, 503, mcp_access.jsonrpc_error(None, SERVER_BUSY, message),
                             headers=((b"retry-after", str(RETRY_AFTER_SECONDS).encode()),))  # fmt: skip
            return
        if checked is not None:
            await self._ensure_started()
            if scope.get("method") == "GET":
                send = _stream_opened_at_once(send)
            await self.manager.handle_request(*checked, send)

    async def _checked(self, scope, receive, send):
        """(scope, receive) for the SDK once the host, the credential, the rate limits, the caller's rights and the
        body pass; None when an answer was sent here instead."""
        headers = dict(scope.get("headers", ()))
        if not _allowed_host(headers):
            await _send_json(send, 400, {"error": "Host not allowed."})
            return None
        request = ASGIRequest(scope, io.BytesIO())  # Django's view of the URL: resource and metadata URLs
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if not auth.startswith("Bearer "):
            await _send_json(send, 401, {"error": "Missing credentials: send Authorization: Bearer <API key or "
                                                  "OAuth access token>, or connect with OAuth."},
                             headers=((b"www-authenticate", oauth.bearer_challenge(request).encode()),))  # fmt: skip
            return None
        token = auth.removeprefix("Bearer ").strip()
        message, rejected, receive = await mcp_access.read_message(scope, receive)
        admission, planned = await database_sync_to_async(_admit)(token, oauth.mcp_resource(request), message)
        credential = admission.credential
        if credential is None:
            challenge = oauth.bearer_challenge(
                request, error="invalid_token", description="The API key or access token is unknown, expired or revoked"
            )
            await _send_json(send, 401, {"error": "Invalid API key or access token."},
                             headers=((b"www-authenticate", challenge.encode()),))  # fmt: skip
            return None
        api_key = credential.api_key  # an API key, or the key an OAuth client acts as for its user
        exceeded = admission.exceeded
        if exceeded is not None:  # 429 with a JSON-RPC error; the body is not read, so no request id
            await _send_json(send, 429, mcp_access.jsonrpc_error(None, mcp_access.RATE_LIMITED, exceeded.message),
                             headers=((b"retry-after", str(exceeded.retry_after).encode()),))  # fmt: skip
            return None
        denial = mcp_access.check(admission, message, rejected)  # 403: the owner or the scopes; a body's 413 or 400
        if denial is not None:
            await _send_json(send, denial.status, denial.payload, headers=denial.headers)
            return None
        scopes = list(credential.scopes)
        principal = AccessToken(token="api-key", client_id=f"toolhub-api-key-{api_key.pk}", scopes=scopes)
        caller = {API_KEY_SCOPE: api_key.pk, KEY_USER_SCOPE: api_key.user_id, PLANNED_CALL_SCOPE: planned}
        return {**scope, "user": AuthenticatedUser(principal), **caller}, receive


def _admit(token: str, resource: str, message) -> tuple[mcp_access.Admission, PlannedCall | None]:
    """The bearer's admission and, when it may call tools and `message` is one tools/call, that call's plan: the
    database is read in one hop to its thread for both, and the call itself then needs none."""
    admission = mcp_access.admit(token, resource=resource)
    return admission, plan_call(message) if admission.may_call else None


def _stream_opened_at_once(send):
    """`send` for a GET (the client's stream of server messages): an SSE comment follows the headers at once.

    Daphne writes a response's headers with its first body bytes, and the SDK's stream sends none until a server
    message or its 15 s ping; clients that wait for the stream to open before their next request (the SDK's own
    client among them) sat 15 s after every initialize. A comment line is ignored by every SSE reader.
    """

    async def send_then_open(message):
        await send(message)
        if message["type"] == "http.response.start" and message.get("status") == 200:
            content_type = dict(message.get("headers", ())).get(b"content-type", b"")
            if content_type.startswith(b"text/event-stream"):
                await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})

    return send_then_open


def path_router(django_app, mcp_app, path: str = "/mcp"):
    """HTTP requests for `path` (exactly, or with a trailing slash) go to `mcp_app`; everything else to Django."""

    async def route(scope, receive, send):
        if scope["type"] == "http" and scope["path"].rstrip("/") == path:
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return route
