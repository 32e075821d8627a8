"""Talk to MCP servers: list their tools and call them, on connections each process keeps open.

Sync callers (Celery tasks, management commands) use `call_tool`,
`connect`, `list_tools` and `disconnect`; async callers use `acall_tool`. The SDK's ClientSession lives
on one background event-loop thread per process: a connection opens on first
use, stays open, and is opened again when its server process died or the
server's settings changed. `call_tool` never raises: protocol errors, crashes
and timeouts come back as McpCallResult(is_error=True) with a message saying
what happened. `connect` and `list_tools` raise McpServerUnavailable instead, so a failed
listing is never mistaken for an empty one. A result keeps its content
blocks and structuredContent as the server sent them (catalog.mcp_client.content).
A sync caller may observe its call (`observing`): the server's progress for it,
and its log messages while it is the only call in flight on that connection
(a message names no request, so with two calls it could be either's), go to
the observer. A server's resources/prompts list_changed notices go to the
listeners registered with `on_list_changed`, its resources/updated notices (for
subscriptions, catalog.mcp_client.resources.asubscribe) to those registered with
`on_resource_updated`. Other notifications a server sends unasked (log messages,
progress nobody requested, updates of resources nobody subscribed to, tool list
changes) are logged once per kind and connection and otherwise ignored. A stdio server starts as
catalog.mcp_client.stdio_process says: its own environment, directory and limits.

Whose connection a call goes through is the server's connection_scope and the call's Caller
(catalog.mcp_client.callers.calling_as): the one shared connection per server and process, or one per user or per
session. Listing, syncing and a caller without a user use the shared one. Per-user and per-session connections
idle TOOLHUB_MCP_IDLE_SECONDS are closed, and at most TOOLHUB_MCP_MAX_CONNECTIONS of them are open per process.
During a call, the server's elicitation/create and sampling/createMessage go to the call's Caller when it is the
only call in flight on that connection (a request names no call of ours, as a log message does not), within the
bounds callers.py sets; otherwise the server gets an error saying why. Never touches the database itself (an OAuth
server's tokens are read and refreshed through the store its Endpoint carries, catalog.mcp_oauth), and never shows
a server's environment or headers (they hold its tokens) in a message or a log.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from django.conf import settings
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
    CreateMessageRequestParams,
    ElicitRequestParams,
    ErrorData,
    LoggingMessageNotification,
    PaginatedRequestParams,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
)

from catalog.mcp_oauth.auth import UpstreamOAuth
from catalog.mcp_oauth.grants import for_user, upstream_oauth
from catalog.models import McpServer

from . import callers
from .callers import Caller
from .content import model_text, wire_block
from .http_failures import HttpAnswers
from .http_failures import describe as describe_http_failure
from .stdio_process import connection_dir, stdio_parameters

logger = logging.getLogger(__name__)

STDIO = McpServer.Transport.STDIO
STREAMABLE_HTTP = McpServer.Transport.STREAMABLE_HTTP
_GRACE_SECONDS = 10  # a sync caller's safety net beyond the timeout, which the coroutines enforce themselves
_STDERR_TAIL_BYTES = 1500
_MAX_LIST_PAGES = 100


@dataclass(frozen=True)
class McpCallResult:
    content: str  # what a model reads of the answer (mcp_content.model_text), or what went wrong
    is_error: bool = False
    blocks: tuple[dict, ...] = ()  # the content blocks as the server sent them (MCP JSON)
    structured: Any = None  # structuredContent as the server sent it

    @classmethod
    def of(cls, result) -> McpCallResult:
        blocks = tuple(wire_block(block) for block in result.content or ())
        return cls(model_text(blocks, result.structured_content), bool(result.is_error), blocks,
                   result.structured_content)  # fmt: skip


class McpServerUnavailable(Exception):
    """The server could not be reached, did not answer in time, or answered with a protocol error."""


@dataclass(frozen=True)
class CallObserver:
    """Who hears what a server says about one call while it runs. The callbacks run on the client's loop
    thread and must not block: on_progress(progress, total, message); on_log(level, data, logger)."""

    on_progress: Callable[[float, float | None, str | None], None] | None = None
    on_log: Callable[[str, Any, str | None], None] | None = None


_observer: ContextVar[CallObserver | None] = ContextVar("mcp_call_observer", default=None)


@contextlib.contextmanager
def observing(observer: CallObserver):
    """`call_tool` calls made inside this block (in this thread or context) report to `observer`."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


ListChangeListener = Callable[[str, str], None]  # (server name, notification method), on the client's loop thread
_list_change_listeners: list[ListChangeListener] = []
LIST_CHANGES = {
    ResourceListChangedNotification: "notifications/resources/list_changed",
    PromptListChangedNotification: "notifications/prompts/list_changed",
}


def on_list_changed(listener: ListChangeListener) -> None:
    """Call `listener` when a server says its resource or prompt list changed (once per listener)."""
    if listener not in _list_change_listeners:
        _list_change_listeners.append(listener)


# (server name, resource URI) -> whether someone subscribed to it, on the client's loop thread
ResourceUpdateListener = Callable[[str, str], bool]
_resource_update_listeners: list[ResourceUpdateListener] = []


def on_resource_updated(listener: ResourceUpdateListener) -> None:
    """Call `listener` when a server says a resource changed (once per listener); an update no listener says it
    subscribed to is logged as unasked."""
    if listener not in _resource_update_listeners:
        _resource_update_listeners.append(listener)


def mcp_timeout() -> float:
    return float(settings.TOOLHUB_MCP_TIMEOUT)


def max_tools() -> int:
    return int(settings.TOOLHUB_MCP_MAX_TOOLS)


@dataclass(frozen=True)
class Endpoint:
    """How to reach one server; a connection is reused only while this stays the same."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # tokens: never in a repr
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    scope: str = McpServer.ConnectionScope.SHARED
    oauth: UpstreamOAuth | None = field(default=None, repr=False)  # a server that needs OAuth: where its tokens are

    @classmethod
    def of(cls, server) -> Endpoint:
        return cls(
            name=server.name,
            transport=server.transport,
            command=server.command or "",
            args=tuple(str(arg) for arg in server.args or ()),
            env=tuple(sorted((str(k), str(v)) for k, v in (server.env or {}).items())),
            url=server.url or "",
            headers=tuple(sorted((str(k), str(v)) for k, v in (server.headers or {}).items())),
            scope=server.connection_scope,
            oauth=upstream_oauth(server),
        )


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _WatchedReadStream:
    """The transport's read stream, noting end of stream (the server process is gone)."""

    def __init__(self, inner, on_eof):
        self._inner, self._on_eof = inner, on_eof

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def receive(self):
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    async def aclose(self):
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info):
        await self._inner.aclose()
        return None


@dataclass
class _InFlight:
    """One call in flight on a connection: who observes it, who it is for, until when it may ask its caller, and
    what it asked so far."""

    observer: CallObserver | None
    caller: Caller | None
    deadline: float
    samplings: int = 0
    cut: str = ""  # why toolhub stopped the call (too many samplings); its task is then cancelled
    task: asyncio.Task | None = None


class _Connection:
    """One session with one server, for `owner` (callers.connection_owner: "" for the shared one). Lives on the loop
    thread; `_run` owns the transport from open to close."""

    def __init__(self, endpoint: Endpoint, owner: str = ""):
        self.endpoint = endpoint
        self.owner = owner
        self.last_used = time.monotonic()
        self.session: ClientSession | None = None
        self.capabilities = None  # what the server said it offers in its handshake (ServerCapabilities)
        self.calls: list[_InFlight] = []  # the calls in flight, from before their connection is ready
        self.failure = ""  # why the connection could not open or ended
        self.http_answers = HttpAnswers()  # the HTTP refusals a streamable HTTP server gave, to say why
        self.refusals_seen = 0  # how many of them refused_request (or the handshake) accounted for
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._gone = False
        self._stderr = tempfile.TemporaryFile() if endpoint.transport == STDIO else None
        self._stderr_at_close = ""
        self.task: asyncio.Task | None = None
        self.unsolicited: dict[str, int] = {}  # notification method -> how many came unasked

    @property
    def label(self) -> str:
        if self.owner.startswith("users/"):
            return f"MCP server {self.endpoint.name!r} (user {self.owner.removeprefix('users/')}'s connection)"
        if self.owner:
            return f"MCP server {self.endpoint.name!r} (a session's connection)"
        return f"MCP server {self.endpoint.name!r}"

    @property
    def dead(self) -> bool:
        return self._gone or (self.task is not None and self.task.done())

    def start(self, timeout: float) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(timeout))

    def stop(self) -> None:
        """Close the session; `_run` then closes the transport, which stops a stdio server's process."""
        self._gone = True
        self._stop.set()

    def stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return self._stderr_at_close
        size = os.fstat(self._stderr.fileno()).st_size
        data = os.pread(self._stderr.fileno(), _STDERR_TAIL_BYTES, max(0, size - _STDERR_TAIL_BYTES))
        text = data.decode("utf-8", "replace").strip()
        return f" Its last output: {text}" if text else ""

    def _transport(self, timeout: float):
        endpoint = self.endpoint
        if endpoint.transport == STDIO:
            params = stdio_parameters(name=endpoint.name, command=endpoint.command, args=endpoint.args,
                                      env=dict(endpoint.env), owner=self.owner)  # fmt: skip
            return stdio_client(params, errlog=self._stderr)
        if endpoint.transport == STREAMABLE_HTTP:
            oauth = endpoint.oauth
            if oauth is not None and self.owner.startswith("users/"):  # a per-user server's grant: this user's
                oauth = for_user(oauth, int(self.owner.removeprefix("users/")))
            return _http_transport(endpoint, timeout, self.http_answers, oauth)
        raise ValueError(f"unknown transport {endpoint.transport!r}")

    async def _run(self, timeout: float) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Entering the transport only spawns the process (or prepares HTTP); the handshake is what waits.
                read, write = await stack.enter_async_context(self._transport(timeout))
                session = ClientSession(_WatchedReadStream(read, self.stop), write, message_handler=self._on_message,
                                        elicitation_callback=self._on_elicitation,
                                        sampling_callback=self._on_sampling)  # fmt: skip
                await stack.enter_async_context(session)
                with anyio.fail_after(timeout):
                    initialized = await session.initialize()
                self.capabilities = initialized.capabilities
                self.session = session
                self.refusals_seen = len(self.http_answers.refusals)  # later ones are the open session's
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self.failure = self._describe_failure(_leaf(exc), timeout)
            if self.session is None:
                logger.warning("%s", self.failure)
        finally:
            self.session = None
            self._gone = True
            self._ready.set()
            if self._stderr is not None:
                self._stderr_at_close = self.stderr_tail()
                self._stderr.close()
            if self.owner.startswith("sessions/") and self.endpoint.transport == STDIO:
                # A session's directory lives as long as its connection; a user's stays for the next one.
                shutil.rmtree(connection_dir(self.endpoint.name, self.owner), ignore_errors=True)

    async def _on_message(self, message) -> None:
        """What the server sent that answers no request: a list change or a log message someone listens to goes
        to them; the rest is logged once per kind, never acted on."""
        if isinstance(message, tuple(LIST_CHANGES)):
            for listener in list(_list_change_listeners):
                try:
                    listener(self.endpoint.name, LIST_CHANGES[type(message)])
                except Exception:
                    logger.exception("a listener of %s's list changes failed", self.label)
            if _list_change_listeners:
                return
        if isinstance(message, ResourceUpdatedNotification):
            wanted = False
            for listener in list(_resource_update_listeners):
                try:
                    wanted = listener(self.endpoint.name, str(message.params.uri)) or wanted
                except Exception:
                    logger.exception("a listener of %s's resource updates failed", self.label)
            if wanted:
                return
        if isinstance(message, LoggingMessageNotification) and len(self.calls) == 1 and self.calls[0].observer:
            observer = self.calls[0].observer
            if observer.on_log is not None:
                params = message.params
                observer.on_log(params.level, params.data, params.logger)
                return
        if isinstance(message, Exception):
            kind = f"unreadable message ({type(message).__name__})"
            detail = f"something that is not MCP: {message}"
        else:
            kind = getattr(message, "method", type(message).__name__)
            detail = f"{kind}, which toolhub did not ask for"
            if kind == "notifications/tools/list_changed":
                detail += " (its tool list changed: sync it to update the catalog)"
        self.unsolicited[kind] = self.unsolicited.get(kind, 0) + 1
        if self.unsolicited[kind] == 1:
            logger.warning("%s sent %s; ignored (further ones are only counted).", self.label, detail)

    def _only_call(self, asked: str) -> _InFlight | str:
        """The call a server's request is for: the one call in flight, or why there is none to tell."""
        if len(self.calls) == 1:
            return self.calls[0]
        if not self.calls:
            return f"no tool call is in flight on this connection to ask {asked} for"
        return f"{len(self.calls)} tool calls are in flight on this connection, and a request names none of them"

    def _decline(self, code: int, asked: str, reason: str) -> ErrorData:
        logger.warning("%s asked for %s; declined: %s.", self.label, asked, reason)
        return ErrorData(code=code, message=f"toolhub declined the {asked}: {reason}.")

    async def _relay(self, call: _InFlight, answer, asked: str):
        """The caller's answer, within what remains of the call's time; an error the server reads otherwise."""
        try:
            return await asyncio.wait_for(answer, max(call.deadline - time.monotonic(), 0.1))
        except TimeoutError:
            return self._decline(REQUEST_TIMEOUT, asked, "the caller did not answer within the tool call's time")
        except Exception as exc:
            logger.warning("%s: relaying %s failed: %s", self.label, asked, type(exc).__name__)
            return ErrorData(code=INTERNAL_ERROR, message=f"toolhub could not relay the {asked}: {type(exc).__name__}.")

    async def _on_elicitation(self, context, params: ElicitRequestParams) -> Any:
        asked = "elicitation"
        call = self._only_call(asked)
        if isinstance(call, str):
            return self._decline(INVALID_REQUEST, asked, call)
        problem = callers.elicitation_problem(params)
        if problem:
            return self._decline(INVALID_PARAMS, asked, f"it is malformed: {problem}")
        if call.caller is None or call.caller.elicit is None:
            return self._decline(INVALID_REQUEST, asked, call.caller.cannot_ask if call.caller else callers.NO_CALLER)
        return await self._relay(call, call.caller.elicit(params, max(call.deadline - time.monotonic(), 0.1)), asked)

    async def _on_sampling(self, context, params: CreateMessageRequestParams) -> Any:
        asked = "sampling request"
        call = self._only_call(asked)
        if isinstance(call, str):
            return self._decline(INVALID_REQUEST, asked, call)
        limit = callers.sampling_per_call()
        if call.samplings >= limit:
            call.cut = (f"{self.label} asked for more than {limit} samplings during one tool call "
                        "(TOOLHUB_MCP_SAMPLING_PER_CALL), so toolhub stopped the call")  # fmt: skip
            if call.task is not None:
                call.task.cancel()
            return self._decline(INVALID_REQUEST, asked, f"a tool call may ask for {limit} samplings at most")
        call.samplings += 1
        if call.caller is None or call.caller.sample is None:
            return self._decline(INVALID_REQUEST, asked, call.caller.cannot_ask if call.caller else callers.NO_CALLER)
        most = callers.sampling_max_tokens()
        if params.max_tokens > most:  # maxTokens is a maximum: a smaller one is within what the server asked
            params = params.model_copy(update={"max_tokens": most})
        return await self._relay(call, call.caller.sample(params), asked)

    def _describe_failure(self, exc: BaseException, timeout: float) -> str:
        if self.session is not None:
            return f"{self.label} connection ended ({type(exc).__name__}: {exc})."
        if isinstance(exc, TimeoutError):
            return f"{self.label} did not complete the MCP handshake within {timeout:g} s.{self.stderr_tail()}"
        if isinstance(exc, OSError) and self.endpoint.transport == STDIO:
            return f"{self.label} could not be started ({self.endpoint.command}): {exc}."
        if self.endpoint.transport == STREAMABLE_HTTP:
            sends_authorization = any(name.lower() == "authorization" for name, _ in self.endpoint.headers)
            explained = describe_http_failure(self.label, self.endpoint.url, self.http_answers,
                                              sends_authorization=sends_authorization, exc=exc,
                                              oauth=self.endpoint.oauth is not None)  # fmt: skip
            if explained:
                return explained
        if isinstance(exc, MCPError) and exc.error.code == CONNECTION_CLOSED:
            return f"{self.label} closed the connection while starting (did its process exit?).{self.stderr_tail()}"
        return f"{self.label} could not be connected: {type(exc).__name__}: {exc}.{self.stderr_tail()}"

    def refused_request(self) -> str:
        """Why the server refused a request of the open session since last asked (401 or 403: a token refused, or
        short of a scope), or "": the SDK reports such a refusal as a closed connection or an error response."""
        refusals = self.http_answers.refusals
        if self.session is None or len(refusals) <= self.refusals_seen or refusals[-1].status not in (401, 403):
            return ""
        sends_authorization = any(name.lower() == "authorization" for name, _ in self.endpoint.headers)
        described = describe_http_failure(self.label, self.endpoint.url, self.http_answers, exc=Exception(),
                                          sends_authorization=sends_authorization,
                                          oauth=self.endpoint.oauth is not None)  # fmt: skip
        self.refusals_seen = len(refusals)
        return described

    async def ready_session(self, timeout: float) -> ClientSession:
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            raise McpServerUnavailable(f"{self.label} did not finish starting within {timeout:g} s.") from None
        if self.session is None:
            raise McpServerUnavailable(self.failure or f"{self.label} is not connected.")
        return self.session


@contextlib.asynccontextmanager
async def _http_transport(endpoint: Endpoint, timeout: float, answers: HttpAnswers, oauth: UpstreamOAuth | None):
    client = httpx2.AsyncClient(headers=dict(endpoint.headers), timeout=httpx2.Timeout(timeout, read=300),
                                event_hooks={"response": [answers.hook]},
                                auth=oauth.http_auth(endpoint.url) if oauth else None,
                                transport=oauth.http_transport(endpoint.url) if oauth else None)  # fmt: skip
    async with client, streamable_http_client(endpoint.url, http_client=client) as streams:
        yield streams


class _LoopThread:
    """The process's background event loop and the connections that live on it."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        # by (server name, owner: "" for the shared one); touched only on the loop thread
        self.connections: dict[tuple[str, str], _Connection] = {}
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-client", daemon=True)
        self.thread.start()
        self.submit(self._close_idle_ones())

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def connection(self, endpoint: Endpoint, timeout: float, owner: str = "") -> _Connection:
        """The open connection to `endpoint` for `owner`, or a new one; raises McpServerUnavailable when a new
        per-user or per-session one would pass TOOLHUB_MCP_MAX_CONNECTIONS and none is idle to close."""
        key = (endpoint.name, owner)
        current = self.connections.get(key)
        if current is not None and (current.endpoint != endpoint or current.dead):
            current.stop()  # its task closes the transport (and stops the process) on its own
            del self.connections[key]
            current = None
        if current is None:
            if owner:
                self._make_room()
            current = self.connections[key] = _Connection(endpoint, owner)
            current.start(timeout)
        current.last_used = time.monotonic()
        return current

    def owned(self) -> dict[tuple[str, str], _Connection]:
        """The per-user and per-session connections."""
        return {key: connection for key, connection in self.connections.items() if key[1]}

    def _make_room(self) -> None:
        owned, most = self.owned(), callers.max_connections()
        idle = sorted((key for key, connection in owned.items() if not connection.calls),
                      key=lambda key: owned[key].last_used)  # fmt: skip
        excess = len(owned) - most + 1
        if excess > len(idle):
            raise McpServerUnavailable(
                f"toolhub has {len(owned)} per-user and per-session MCP connections open in this process, all in "
                f"use, the most TOOLHUB_MCP_MAX_CONNECTIONS allows; try again shortly."
            )
        for key in idle[: max(excess, 0)]:
            self.connections.pop(key).stop()

    async def _close_idle_ones(self) -> None:
        """Forever: close the per-user and per-session connections unused for TOOLHUB_MCP_IDLE_SECONDS."""
        while True:
            idle = callers.idle_seconds()
            await asyncio.sleep(min(max(idle / 4, 0.05), 1.0))  # a setting changed at run time applies within 1 s
            now = time.monotonic()
            for key, connection in self.owned().items():
                if not connection.calls and now - connection.last_used > idle:
                    self.connections.pop(key).stop()


_loop_lock = threading.Lock()
_loop_state: dict[str, Any] = {"pid": None, "thread": None}


def _loop_thread() -> _LoopThread:
    # A forked worker (Celery prefork) gets its own loop and connections, never its parent's.
    with _loop_lock:
        if _loop_state["pid"] != os.getpid():
            _loop_state.update(pid=os.getpid(), thread=_LoopThread())
        return _loop_state["thread"]


def _progress_relay(observer: CallObserver | None):
    """The SDK's progress callback for a call whose observer listens to progress (the SDK then asks for it)."""
    if observer is None or observer.on_progress is None:
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        observer.on_progress(progress, total, message)

    return relay


async def _call(
    endpoint: Endpoint,
    name: str,
    arguments: dict,
    timeout: float,
    observer: CallObserver | None = None,
    caller: Caller | None = None,
) -> McpCallResult:
    deadline = time.monotonic() + timeout
    try:
        connection = _loop_thread().connection(endpoint, timeout, callers.connection_owner(endpoint.scope, caller))
    except McpServerUnavailable as exc:
        return McpCallResult(f"{exc} {name} was not run.", is_error=True)
    in_flight = _InFlight(observer, caller, deadline)
    connection.calls.append(in_flight)  # from now on: not idle, so not closed under the call
    try:
        return await _call_on(connection, in_flight, name, arguments, timeout)
    finally:
        connection.calls.remove(in_flight)
        connection.last_used = time.monotonic()


async def _call_on(
    connection: _Connection, in_flight: _InFlight, name: str, arguments: dict, timeout: float
) -> McpCallResult:
    try:
        session = await connection.ready_session(timeout)
    except McpServerUnavailable as exc:
        return McpCallResult(f"{exc} {name} was not run.", is_error=True)
    remaining = max(in_flight.deadline - time.monotonic(), 0.5)
    observer = in_flight.observer
    try:
        call = session.call_tool(name, arguments, read_timeout_seconds=remaining,
                                 progress_callback=_progress_relay(observer))  # fmt: skip
        in_flight.task = asyncio.ensure_future(call)
        result = await asyncio.wait_for(in_flight.task, remaining + 1)
    except asyncio.CancelledError:
        if not in_flight.cut:
            raise
        return McpCallResult(f"{in_flight.cut}; {name} may or may not have taken effect.", is_error=True)
    except (TimeoutError, MCPError) as exc:
        if isinstance(exc, TimeoutError) or exc.error.code == REQUEST_TIMEOUT:
            _in_background(_drop_if_unresponsive(connection, session))
            return McpCallResult(f"{connection.label} did not answer {name} within {timeout:g} s.", is_error=True)
        refused = connection.refused_request()
        if exc.error.code == CONNECTION_CLOSED:
            connection.stop()
        if refused:
            return McpCallResult(f"{refused} {name} was not run.", is_error=True)
        if exc.error.code == CONNECTION_CLOSED:
            hint = "did its process crash?" if connection.endpoint.transport == STDIO else "is the server down?"
            message = f"{connection.label} closed the connection while running {name} ({hint})."
            return McpCallResult(
                message + " The call may or may not have taken effect." + connection.stderr_tail(), True
            )
        return McpCallResult(f"{connection.label} refused {name}: {exc.error.message} (code {exc.error.code}).", True)
    except Exception as exc:  # a malformed answer: the server does not speak the protocol as expected
        logger.warning("%s answered %s with something unexpected", connection.label, name, exc_info=True)
        return McpCallResult(f"{connection.label} gave an invalid answer to {name}: {type(exc).__name__}: {exc}", True)
    return McpCallResult.of(result)


_background_tasks: set[asyncio.Task] = set()


def _in_background(coro) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _background_tasks.add(task)  # the loop keeps only a weak reference
    task.add_done_callback(_background_tasks.discard)


async def _drop_if_unresponsive(connection: _Connection, session: ClientSession) -> None:
    """After a timeout, keep the connection only if the server still answers a ping."""
    try:
        await asyncio.wait_for(session.send_ping(), 5)
    except Exception:
        connection.stop()


def _listed(tool) -> dict:
    """A listed tool as plain data: what the catalog stores of it, as the server sent it."""
    return {
        "name": tool.name,
        "title": tool.title or "",
        "description": tool.description or "",
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        if tool.annotations is not None else None,
    }  # fmt: skip


class TooManyTools(McpServerUnavailable):
    """The server lists more tools than TOOLHUB_MCP_MAX_TOOLS allows."""


async def _list(endpoint: Endpoint, timeout: float, limit: int) -> list[dict]:
    connection = _loop_thread().connection(endpoint, timeout)
    session = await connection.ready_session(timeout)
    tools, cursor = [], None
    try:
        async with asyncio.timeout(timeout):
            for _ in range(_MAX_LIST_PAGES):
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools += [_listed(tool) for tool in page.tools]
                if len(tools) > limit:
                    raise TooManyTools(
                        f"{connection.label} lists more than {limit:,} tools ({len(tools):,} so far), more than "
                        f"TOOLHUB_MCP_MAX_TOOLS allows; nothing was imported. Raise the limit to import them."
                    )
                cursor = page.next_cursor
                if not cursor:
                    return tools
    except TimeoutError:
        raise McpServerUnavailable(f"{connection.label} did not list its tools within {timeout:g} s.") from None
    except McpServerUnavailable:
        raise
    except MCPError as exc:
        refused = connection.refused_request()
        if exc.error.code == CONNECTION_CLOSED:
            connection.stop()
        if refused:
            raise McpServerUnavailable(refused) from None
        raise McpServerUnavailable(f"{connection.label} could not list its tools: {exc.error.message}.") from None
    except Exception as exc:  # a malformed listing
        message = f"{connection.label} gave an invalid tool list: {type(exc).__name__}: {exc}"
        raise McpServerUnavailable(message) from exc
    raise McpServerUnavailable(f"{connection.label} listed more than {_MAX_LIST_PAGES} pages of tools.")


def _problem(server) -> str | None:
    if not server.enabled:
        return f"MCP server {server.name!r} is disabled."
    if server.transport == STDIO and not server.command:
        return f"MCP server {server.name!r} has no command to start."
    if server.transport == STREAMABLE_HTTP and not server.url:
        return f"MCP server {server.name!r} has no URL."
    if server.transport not in (STDIO, STREAMABLE_HTTP):
        return f"MCP server {server.name!r} has an unknown transport {server.transport!r}."
    return None


def call_tool(server, name: str, arguments: dict) -> McpCallResult:
    """Run tool `name` on `server` (an McpServer) and wait for its answer; never raises."""
    problem = _problem(server)
    if problem:
        return McpCallResult(f"{problem} {name} was not run.", is_error=True)
    timeout = mcp_timeout()
    call = _call(Endpoint.of(server), name, arguments, timeout, _observer.get(), callers.current_caller())
    future = _loop_thread().submit(call)
    try:
        return future.result(timeout + _GRACE_SECONDS)
    except concurrent.futures.TimeoutError:
        future.cancel()
        return _no_answer(server, name, timeout)
    except Exception as exc:  # a bug here must not take the caller's turn down
        return _failed(server, name, exc)


async def acall_tool(server, name: str, arguments: dict) -> McpCallResult:
    """`call_tool` for async callers: awaits the loop thread instead of blocking; never raises either (but is
    cancelled with its caller, and then cancels the call)."""
    problem = _problem(server)
    if problem:
        return McpCallResult(f"{problem} {name} was not run.", is_error=True)
    timeout = mcp_timeout()
    call = _call(Endpoint.of(server), name, arguments, timeout, _observer.get(), callers.current_caller())
    future = _loop_thread().submit(call)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout + _GRACE_SECONDS)
    except TimeoutError:  # wait_for cancelled the call
        return _no_answer(server, name, timeout)
    except Exception as exc:
        return _failed(server, name, exc)


def _no_answer(server, name: str, timeout: float) -> McpCallResult:
    return McpCallResult(f"MCP server {server.name!r} did not answer {name} within {timeout:g} s.", True)


def _failed(server, name: str, exc: Exception) -> McpCallResult:
    logger.error("calling %s on MCP server %s failed", name, server.name, exc_info=exc)
    return McpCallResult(f"Calling {name} on MCP server {server.name!r} failed: {type(exc).__name__}.", True)


async def _connect(endpoint: Endpoint, timeout: float) -> None:
    await _loop_thread().connection(endpoint, timeout).ready_session(timeout)


def connect(server) -> None:
    """Open the connection to `server` (or reuse the open one); raises McpServerUnavailable when it cannot."""
    problem = _problem(server)
    if problem:
        raise McpServerUnavailable(problem)
    timeout = mcp_timeout()
    future = _loop_thread().submit(_connect(Endpoint.of(server), timeout))
    try:
        future.result(timeout + _GRACE_SECONDS)
    except concurrent.futures.TimeoutError:
        future.cancel()
        message = f"MCP server {server.name!r} did not finish starting within {timeout:g} s."
        raise McpServerUnavailable(message) from None


def list_tools(server) -> list[dict]:
    """The tools `server` serves now, as dicts: name, title, description, input_schema, output_schema, annotations.

    Raises TooManyTools past TOOLHUB_MCP_MAX_TOOLS (it stops reading there).
    """
    problem = _problem(server)
    if problem:
        raise McpServerUnavailable(problem)
    timeout = mcp_timeout()
    future = _loop_thread().submit(_list(Endpoint.of(server), timeout, max_tools()))
    try:
        return future.result(timeout + _GRACE_SECONDS)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise McpServerUnavailable(f"MCP server {server.name!r} did not list its tools within {timeout:g} s.") from None


async def _close_all(thread: _LoopThread) -> None:
    connections = list(thread.connections.values())
    thread.connections.clear()
    for connection in connections:
        connection.stop()
    tasks = [c.task for c in connections if c.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=_GRACE_SECONDS)


async def _disconnect(thread: _LoopThread, name: str) -> None:
    connections = [thread.connections.pop(key) for key in list(thread.connections) if key[0] == name]
    for connection in connections:
        connection.stop()
    tasks = [c.task for c in connections if c.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=_GRACE_SECONDS)


def disconnect(server) -> None:
    """Close this process's connections to `server`, shared or not, if any (a stdio server's processes exit)."""
    with _loop_lock:
        thread = _loop_state["thread"] if _loop_state["pid"] == os.getpid() else None
    if thread is not None:
        with contextlib.suppress(Exception):
            thread.submit(_disconnect(thread, server.name)).result(_GRACE_SECONDS + 5)


def close_all() -> None:
    """Close every connection of this process (their stdio servers exit)."""
    with _loop_lock:
        thread = _loop_state["thread"] if _loop_state["pid"] == os.getpid() else None
    if thread is not None:
        with contextlib.suppress(Exception):
            thread.submit(_close_all(thread)).result(_GRACE_SECONDS + 5)


atexit.register(close_all)
