"""Resumable /mcp streams: each session's events within one byte budget, replayed after Last-Event-ID (SEP-1699)."""

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from mcp_types import JSONRPCNotification

from agents.access.api_keys import create_api_key
from agents.mcp_gateway.event_store import EVENT_OVERHEAD_BYTES, EventBudget, SessionEvents
from tests.support.builders import make_user
from tests.support.mcp_asgi import McpAsgiClient, asgi_call, sse_events


def note(n: int) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n})


async def replayed(store: SessionEvents, after: str) -> tuple[str | None, list[tuple[str, dict]]]:
    sent = []

    async def send(event):
        sent.append((event.event_id, event.message.model_dump(mode="json", exclude_unset=True)))

    return await store.replay_events_after(after, send), sent


@pytest.mark.asyncio
async def test_a_replay_sends_what_came_after_the_event_on_its_stream_only():
    store = SessionEvents(EventBudget(1 << 20))
    priming = await store.store_event("1", None)
    first = await store.store_event("1", note(1))
    await store.store_event("2", note(99))  # another request's stream of the same session
    second = await store.store_event("1", note(2))

    assert await replayed(store, priming) == ("1", [(first, note(1).model_dump(mode="json")),
                                                   (second, note(2).model_dump(mode="json"))])  # fmt: skip
    assert await replayed(store, first) == ("1", [(second, note(2).model_dump(mode="json"))])
    assert await replayed(store, second) == ("1", [])


@pytest.mark.asyncio
async def test_an_event_id_is_unguessable_and_answers_only_in_its_own_session():
    budget = EventBudget(1 << 20)
    mine, theirs = SessionEvents(budget), SessionEvents(budget)
    # Both sessions' first request has id 1: the streams share a name and must not share events.
    their_priming = await theirs.store_event("1", None)
    await theirs.store_event("1", note(1))
    my_priming = await mine.store_event("1", None)

    assert their_priming != my_priming and len(their_priming) >= 22  # 16 random bytes, URL-safe
    assert await replayed(mine, their_priming) == (None, [])
    assert await replayed(mine, my_priming) == ("1", [])
    assert await replayed(mine, "not-an-event") == (None, [])


@pytest.mark.asyncio
async def test_past_the_budget_the_oldest_events_of_any_session_go_first():
    size = EVENT_OVERHEAD_BYTES + len(note(1).model_dump_json(by_alias=True, exclude_unset=True))
    budget = EventBudget(3 * size)
    old, new = SessionEvents(budget), SessionEvents(budget)
    oldest = await old.store_event("1", note(1))
    await old.store_event("1", note(2))
    await new.store_event("1", note(3))
    assert budget.count == 3 and budget.used_bytes == 3 * size

    await new.store_event("1", note(4))

    assert budget.used_bytes == 3 * size and old.count == 1 and new.count == 2
    assert await replayed(old, oldest) == (None, [])  # dropped: the client calls again


def events_of(content: bytes) -> list[dict]:
    return list(sse_events(content.decode().splitlines()))


async def stream(endpoint, method: str, headers: dict[str, str], body: bytes = b"", *, until=None) -> list[dict]:
    """One request's SSE events; the client disconnects once `until(events)` holds (or at the end of the body)."""
    stop = None if until is None else (lambda content: until(events_of(content)))
    reply = await asyncio.wait_for(asgi_call(endpoint, method, "/mcp", headers, body, until=stop), timeout=20)
    assert reply.status == 200, reply
    return events_of(reply.body)


def answered(request_id: int):
    return lambda events: any(json.loads(e["data"]).get("id") == request_id for e in events if e.get("data"))


async def opened_session(endpoint, version: str, user: str = "ops") -> McpAsgiClient:
    key = await sync_to_async(lambda: create_api_key(user=make_user(user), name="test")[1])()
    client = McpAsgiClient(endpoint, key)
    client.protocol_version = version
    assert (await client.initialize()).status == 200
    return client


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_client_that_reconnects_with_last_event_id_is_sent_what_it_missed(mcp_endpoint):
    client = await opened_session(mcp_endpoint, "2025-11-25")
    listing = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}).encode()

    events = await stream(mcp_endpoint, "POST", client.headers(), listing)

    priming, answer = events
    assert priming["data"] == "" and priming["id"] and priming["retry"] == "1000"  # TOOLHUB_MCP_SSE_RETRY_MS
    assert answer["id"] and json.loads(answer["data"])["id"] == 7
    # The stream dropped after the priming event: a GET naming it is sent the answer, under its own id.
    resumed = {**client.headers(), "accept": "text/event-stream", "last-event-id": priming["id"]}
    replay = await stream(mcp_endpoint, "GET", resumed, until=answered(7))
    assert [(e["id"], e["data"]) for e in replay if e.get("data")] == [(answer["id"], answer["data"])]

    # Another session cannot name this one's events: nothing is replayed to it.
    other = await opened_session(mcp_endpoint, "2025-11-25", user="other")
    foreign = {**other.headers(), "accept": "text/event-stream", "last-event-id": priming["id"]}
    assert [e for e in await stream(mcp_endpoint, "GET", foreign) if e.get("data")] == []


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_client_of_an_older_protocol_gets_no_priming_event(mcp_endpoint):
    """Clients before 2025-11-25 would try to parse the empty data (the SDK sends them none)."""
    client = await opened_session(mcp_endpoint, "2025-06-18")
    listing = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}).encode()

    (answer,) = await stream(mcp_endpoint, "POST", client.headers(), listing)

    assert json.loads(answer["data"])["id"] == 3 and "retry" not in answer


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_with_no_event_buffer_streams_are_not_resumable(settings):
    from agents.mcp_gateway.server import McpEndpoint

    settings.TOOLHUB_MCP_EVENT_BUFFER_BYTES = 0
    endpoint = McpEndpoint()
    try:
        client = await opened_session(endpoint, "2025-11-25")
        listing = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}).encode()
        (answer,) = await stream(endpoint, "POST", client.headers(), listing)
        assert "id" not in answer and json.loads(answer["data"])["id"] == 4
    finally:
        endpoint._runner.cancel()
