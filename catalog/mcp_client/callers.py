"""Who a tool call to an MCP server is made for, and what a server may ask that caller while the call runs.

A `Caller` names the user and the session (an /mcp session, or a conversation for a turn) a call is made for,
which choose the connection it goes through (McpServer.connection_scope: shared, per user, per session), and says
how to answer the server's elicitation/create and sampling/createMessage requests during the call: `elicit` and
`sample` (async, run on the MCP client's loop thread; `elicit` is also given the seconds left of the tool call, the
time its answer has) or, when there is none, `cannot_ask`, the reason the server is told. The bounds on what a
server may ask are here too: an elicitation's form must be a flat object of primitive fields (elicitation_problem),
a sampling request's maxTokens is cut to TOOLHUB_MCP_SAMPLING_MAX_TOKENS and a call may ask for
TOOLHUB_MCP_SAMPLING_PER_CALL samplings at most. Touches the database only through the work `in_worker_thread` runs
for code on the MCP client's loop.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from catalog.models import McpServer

Scope = McpServer.ConnectionScope
# (the server's request, the seconds left of the tool call) -> the answer the server gets
ElicitAnswer = Callable[[types.ElicitRequestParams, float], Awaitable[types.ElicitResult | types.ErrorData]]
SampleAnswer = Callable[[types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult | types.ErrorData]]
NO_CALLER = "this call has no caller toolhub can ask (a sync, a test connection or a shell)"


@dataclass(frozen=True)
class Caller:
    user_id: int | None = None
    session_key: str = ""  # "mcp:<Mcp-Session-Id>" or "conversation:<id>"; only its digest is ever shown or stored
    elicit: ElicitAnswer | None = None
    sample: SampleAnswer | None = None
    cannot_ask: str = NO_CALLER  # why a server's request gets an error when elicit or sample is None


_caller: ContextVar[Caller | None] = ContextVar("mcp_caller", default=None)


@contextlib.contextmanager
def calling_as(caller: Caller):
    """Tool calls made inside this block (in this thread or context) are made for `caller`."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def current_caller() -> Caller | None:
    return _caller.get()


T = TypeVar("T")


def in_worker_thread(work: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """`work` (sync, reading the database) awaited from the MCP client's loop as a request runs: in a worker thread of
    its own, whose database connections close afterwards (the loop thread never holds one)."""

    def run(*args: Any, **kwargs: Any) -> T:
        try:
            return work(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(run, thread_sensitive=False)


def connection_owner(scope: str, caller: Caller | None) -> str:
    """Whose connection a call of `caller` to a server of `scope` goes through: "" (the shared one), "users/<id>" or
    "sessions/<digest>". A per-session call without a session falls back to its user's connection, a per-user
    call without a user to the shared one."""
    if caller is None:
        return ""
    if scope == Scope.PER_SESSION and caller.session_key:
        return "sessions/" + hashlib.sha256(caller.session_key.encode()).hexdigest()[:32]
    if scope in (Scope.PER_SESSION, Scope.PER_USER) and caller.user_id is not None:
        return f"users/{int(caller.user_id)}"
    return ""


def idle_seconds() -> float:
    return float(settings.TOOLHUB_MCP_IDLE_SECONDS)


def max_connections() -> int:
    return int(settings.TOOLHUB_MCP_MAX_CONNECTIONS)


def sampling_per_call() -> int:
    return int(settings.TOOLHUB_MCP_SAMPLING_PER_CALL)


def sampling_max_tokens() -> int:
    return int(settings.TOOLHUB_MCP_SAMPLING_MAX_TOKENS)


_PRIMITIVES = {"string", "number", "integer", "boolean"}
MAX_ELICITATION_FIELDS = 50


def elicitation_problem(params: types.ElicitRequestParams) -> str | None:
    """What is wrong with a server's elicitation request (None when nothing is): a form's requestedSchema must be
    an object whose properties are primitive fields (string, number, integer, boolean) or arrays of enum strings,
    as MCP restricts it; a URL elicitation must give an http(s) URL."""
    if isinstance(params, types.ElicitRequestURLParams):
        if not params.url.startswith(("https://", "http://")):
            return "its url is not an http(s) URL"
        return None
    schema = params.requested_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'its requestedSchema is not {"type": "object", ...}'
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return "its requestedSchema's properties are not an object"
    if len(properties) > MAX_ELICITATION_FIELDS:
        return f"its form has {len(properties)} fields, more than {MAX_ELICITATION_FIELDS}"
    for name, field in properties.items():
        if not isinstance(field, dict):
            return f"field {name!r} is not a schema"
        kind = field.get("type")
        if kind == "array":
            items = field.get("items")
            if not isinstance(items, dict) or not ("enum" in items or "anyOf" in items):
                return f"field {name!r} is an array but not of enum strings"
        elif kind not in _PRIMITIVES:
            return f"field {name!r} has type {kind!r}; a form field is a string, number, integer, boolean or enum list"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) and name in properties for name in required):
        return "its requestedSchema's required names fields it does not have"
    return None
