"""Whose work a log line belongs to: the request, turn, conversation, trace and channel it was written for.

`bound(...)` sets those fields for the code it wraps (contextvars: a request's coroutine or thread, a Celery task);
`ContextFilter` copies them onto every record the root handler writes, so toolhub's own lines, Django's, Daphne's
and Celery's carry them alike; `JsonFormatter` writes one JSON object a line (TOOLHUB_LOG_FORMAT=json). HTTP requests
are bound by `with_request_context` around the whole ASGI app (so Django's own "Not Found" lines, written after the
middleware returns, carry them too), or by `RequestContextMiddleware` where Django is called without it (the test
client, WSGI); turns by agents.tasks.run_turn. Never logs anything itself and never reads a request body.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import re
import uuid
from collections.abc import Iterator

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

FIELDS = ("request_id", "turn_id", "conversation_id", "trace_id", "channel")
REQUEST_ID_HEADER = "X-Request-ID"
_NOTHING_BOUND: dict[str, object] = {}  # never changed: bound() sets a new dict
_context: contextvars.ContextVar[dict[str, object]] = contextvars.ContextVar(
    "toolhub_log_context",
    default=_NOTHING_BOUND,  # noqa: B039 (an empty dict nobody mutates)
)
# A caller's own request id is kept when it is a plain token (a proxy's or the client's); anything else is replaced.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# W3C trace context: version-traceid-parentid-flags; an all-zero trace id is invalid.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


@contextlib.contextmanager
def bound(**fields: object) -> Iterator[None]:
    """Add `fields` (FIELDS only; empty values left out) to the log context of the code inside."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"not a log context field: {', '.join(sorted(unknown))}")
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v not in (None, "")}})
    try:
        yield
    finally:
        _context.reset(token)


def current() -> dict[str, object]:
    return dict(_context.get())


def request_id(offered: str | None) -> str:
    """The caller's X-Request-ID when it is a plain token, else a new one."""
    offered = (offered or "").strip()
    return offered if _REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex


def trace_id(traceparent: str | None) -> str:
    """The trace id of a W3C `traceparent` header; empty when there is none or it is malformed."""
    found = _TRACEPARENT.fullmatch((traceparent or "").strip().lower())
    return found.group(1) if found and found.group(1) != "0" * 32 else ""


def channel_of(path: str) -> str:
    """Which door a request came through: the OpenAI-compatible API, MCP, or the console (pages, OAuth, admin)."""
    if path.startswith("/v1/"):
        return "api"
    if path == "/mcp" or path.startswith("/mcp/"):
        return "mcp"
    return "console"


class ContextFilter(logging.Filter):
    """Puts the bound fields on each record (empty strings for those not bound), for any formatter to use."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, context.get(name, ""))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the bound fields that are set, the exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, "")
            if value not in (None, ""):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class RequestContextMiddleware:
    """Binds a request id (the caller's X-Request-ID or a new one, echoed on the answer), the trace id of its
    `traceparent` and its channel for everything logged while Django handles the request, unless the ASGI wrapper
    (`with_request_context`) already did."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def _fields(self, request) -> dict[str, str]:
        return {
            "request_id": request_id(request.headers.get(REQUEST_ID_HEADER)),
            "trace_id": trace_id(request.headers.get("traceparent")),
            "channel": channel_of(request.path),
        }

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        if "request_id" in _context.get():
            return self.get_response(request)
        fields = self._fields(request)
        with bound(**fields):
            response = self.get_response(request)
        response[REQUEST_ID_HEADER] = fields["request_id"]
        return response

    async def __acall__(self, request):
        if "request_id" in _context.get():
            return await self.get_response(request)
        fields = self._fields(request)
        with bound(**fields):
            response = await self.get_response(request)
        response[REQUEST_ID_HEADER] = fields["request_id"]
        return response


def with_request_context(app):
    """The same around an ASGI app (toolhub.asgi: Django, /mcp, /healthz): bound while the app runs, X-Request-ID on
    its answer unless the app set one."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        fields = {
            "request_id": request_id(headers.get(REQUEST_ID_HEADER.lower())),
            "trace_id": trace_id(headers.get("traceparent")),
            "channel": channel_of(scope.get("path", "")),
        }

        async def send_with_id(message):
            names = {key.lower() for key, _ in message.get("headers", [])}
            if message["type"] == "http.response.start" and REQUEST_ID_HEADER.lower().encode() not in names:
                added = (REQUEST_ID_HEADER.encode(), fields["request_id"].encode())
                message = {**message, "headers": [*message.get("headers", []), added]}
            await send(message)

        with bound(**fields):
            return await app(scope, receive, send_with_id)

    return wrapped
