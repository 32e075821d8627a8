"""Resumable /mcp streams (SEP-1699): each session's events, kept in this process's memory within a byte budget.

With an event store the SDK's transport starts every SSE stream of a client that speaks 2025-11-25 or later with a
priming event (an event id, empty data, and a `retry` field of TOOLHUB_MCP_SSE_RETRY_MS) and gives each message an
id; a client whose stream dropped reconnects with GET and `Last-Event-ID` and is sent what came after it on that
stream, then the rest of the stream as it happens. Older clients get neither (the SDK's choice: they would try to
parse the empty data).

Each session has its own store (`SessionEvents`): the SDK keys a stream by its JSON-RPC request id, which every
session reuses (1, 2, 3 ...), so one shared store would mix sessions' streams. Event ids are random (128 bits), so
only a client that was sent an id can name it, and a store only answers for its own session's ids. Every store of
the process shares one `EventBudget`: past TOOLHUB_MCP_EVENT_BUFFER_BYTES of stored JSON the oldest events of any
session are dropped first; a reconnection after its event is gone gets no replay (the client calls again).

The events live in the Daphne process that serves the session, as the session itself does (the SDK keeps sessions
in memory): behind several processes a client's requests must reach the process that holds its session
(docs/mcp.md, "Resumable streams").
"""

from __future__ import annotations

import secrets
from collections import OrderedDict

from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter

# What one stored event costs besides its JSON: its id, the entries in two ordered dicts, the tuple.
EVENT_OVERHEAD_BYTES = 200


class EventBudget:
    """The bytes every session's events may take in this process; the oldest events go first past it."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._ages: OrderedDict[tuple[int, EventId], tuple[SessionEvents, int]] = OrderedDict()

    def add(self, store: SessionEvents, event_id: EventId, size: int) -> None:
        self._ages[(id(store), event_id)] = (store, size)
        self.used_bytes += size
        while self.used_bytes > self.limit_bytes and self._ages:
            (_, oldest), (owner, oldest_size) = self._ages.popitem(last=False)
            owner.forget(oldest)
            self.used_bytes -= oldest_size

    @property
    def count(self) -> int:
        return len(self._ages)


class SessionEvents(EventStore):
    """One MCP session's events, in the order they were stored: event id -> (stream id, the message's JSON or None
    for a stream's priming event)."""

    def __init__(self, budget: EventBudget):
        self.budget = budget
        self._events: OrderedDict[EventId, tuple[StreamId, str | None]] = OrderedDict()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = secrets.token_urlsafe(16)
        data = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        self._events[event_id] = (stream_id, data)
        self.budget.add(self, event_id, EVENT_OVERHEAD_BYTES + len(data or ""))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send this session's messages stored after `last_event_id` on its stream; that stream's id, or None when
        the id is not this session's or its event was dropped."""
        if last_event_id not in self._events:
            return None
        stream_id, _ = self._events[last_event_id]
        after = False
        for event_id, (stream, data) in list(self._events.items()):
            if after and stream == stream_id and data is not None:
                await send_callback(EventMessage(jsonrpc_message_adapter.validate_json(data), event_id))
            after = after or event_id == last_event_id
        return stream_id

    def forget(self, event_id: EventId) -> None:
        self._events.pop(event_id, None)

    @property
    def count(self) -> int:  # not __len__: the SDK tests a store for truth, and an empty one must pass
        return len(self._events)


class ResumableSessions(StreamableHTTPSessionManager):
    """The SDK's session manager, with a store of its own for each session.

    The SDK hands each new session's transport the manager's `event_store`, read as the session opens; here that
    read makes a new `SessionEvents` on the shared budget (None, no resumability, when there is no budget).
    """

    def __init__(self, app: Server, *, budget: EventBudget | None, **options):
        self.budget = budget
        super().__init__(app, **options)

    @property  # type: ignore[override]
    def event_store(self) -> EventStore | None:
        return None if self.budget is None else SessionEvents(self.budget)

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        if value is not None:  # the SDK's __init__ sets what it was given: nothing, here
            raise ValueError("ResumableSessions makes a store per session from its budget; pass budget=")
