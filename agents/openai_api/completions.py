"""A turn's events as an OpenAI answer: a whole chat.completion, or its SSE chunks ending in [DONE].

Streams replay the stored events and follow the channel-layer group, so nothing is missed whichever side
starts first. A failed turn is never an answer: the completion raises its ApiError; a started stream sends
an error frame and then [DONE]. Client tool calls come out as `tool_calls` with finish_reason "tool_calls".
"""

import asyncio
import json
import logging
import time
import uuid

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from agents.models import TurnEvent
from agents.turns import watchdog
from agents.turns.dispatch import enqueue_turn
from agents.turns.events import FailureReason, stored_events, turn_group
from catalog.models.tokens import count_tokens
from toolhub.db_pool import unavailable_message

from .errors import failure_error

EventType = TurnEvent.Type
log = logging.getLogger(__name__)
# While a turn is quiet (a model thinking, a worker being replaced), streams send this every few seconds: an SSE
# comment line, which SSE parsers (the OpenAI SDKs among them) skip, so proxies and clients see a live connection.
KEEPALIVE_SECONDS = 5.0
KEEPALIVE = {"type": "keepalive", "sequence": 0, "payload": {}}
# A quiet stream reads the store after this long without an event, then after twice as long each time the store
# had nothing new, up to the next keep-alive: an event the channel layer lost is found within a second while events
# flow, and a stream waiting for a queued turn reads the store about twice in a keep-alive's 5 s, not five times.
QUIET_FIRST_SECONDS = 1.0


async def turn_events(turn_id: int, *, start):
    """The turn's events in order: stored ones first, then live ones; ends after `done`.

    While the turn is quiet, a KEEPALIVE every KEEPALIVE_SECONDS, each after the watchdog looked at the turn (a
    turn whose worker died is restarted or failed there, and its end then read from the store), and the store is
    read after QUIET_FIRST_SECONDS without an event, then after twice as long each time (a stream of a turn queued
    behind others costs its process a read about twice a keep-alive, not every second). The stream holds
    no database connection while it waits (each read hands its connection back to the pool), and keeps one
    channel-layer receive open on its channel (cancelling a receive drops what the layer had buffered for it).
    When the pool has no connection in time, the stream waits a second and reads again: never an error.
    """
    layer = get_channel_layer()
    channel = await layer.new_channel()
    listening = await follow(layer.group_add, turn_group(turn_id), channel)
    runner = asyncio.ensure_future(start())
    receiving: asyncio.Future | None = None  # the stream's one pending layer.receive
    deadline = time.monotonic() + settings.TOOLHUB_TURN_TIME_LIMIT + 30
    last = 0
    heard = time.monotonic()
    quiet = QUIET_FIRST_SECONDS  # how long the next wait for a live event lasts before the store is read
    try:
        while time.monotonic() < deadline:
            if runner.done() and runner.exception() is not None:
                raise runner.exception()  # the turn could not be started: the stream ends with an error frame
            for event in await from_store(stored_events, turn_id, after=last) or ():
                last, heard, quiet = event["sequence"], time.monotonic(), QUIET_FIRST_SECONDS
                yield event
                if event["type"] == EventType.DONE:
                    return
            if time.monotonic() - heard >= KEEPALIVE_SECONDS:
                heard = time.monotonic()
                await from_store(watchdog.take_over, turn_id)
                yield KEEPALIVE
                continue
            while True:  # live events until a gap or a quiet spell sends us back to the store
                if not listening:  # the channel layer failed (Redis restarting): the store alone, every second
                    await asyncio.sleep(1.0)
                    break
                if receiving is None:
                    receiving = asyncio.ensure_future(layer.receive(channel))
                wait = min(quiet, max(0.0, heard + KEEPALIVE_SECONDS - time.monotonic()))
                done, _ = await asyncio.wait({receiving}, timeout=wait)
                if not done:
                    quiet = min(2 * quiet, KEEPALIVE_SECONDS)
                    break
                received, receiving = receiving, None
                try:
                    message = received.result()
                except Exception as error:
                    log.warning("turn %s: the channel layer failed (%r); reading the stored events", turn_id, error)
                    listening = False
                    break
                event = message["event"]
                if event["sequence"] <= last:
                    continue
                if event["sequence"] != last + 1:
                    break
                last, heard, quiet = event["sequence"], time.monotonic(), QUIET_FIRST_SECONDS
                yield event
                if event["type"] == EventType.DONE:
                    return
        yield {
            "type": EventType.ERROR,
            "sequence": 0,
            "payload": {"message": "The turn did not finish in time.", "reason": FailureReason.TURN_TIMEOUT},
        }
    finally:
        if receiving is not None:
            receiving.cancel()
        await follow(layer.group_discard, turn_group(turn_id), channel)
        if runner.done() and not runner.cancelled() and runner.exception() is not None:
            log.warning("turn %s: starting it failed: %r", turn_id, runner.exception())


async def from_store(read, *args, **kwargs):
    """`read(*args, **kwargs)` on a pooled connection handed back after (database_sync_to_async closes it);
    None when the pool had no connection to give in time or the database could not be reached (restarting): the
    caller tries again a second later, and keeps its keep-alives going meanwhile."""
    try:
        return await database_sync_to_async(read)(*args, **kwargs)
    except Exception as error:
        if unavailable_message(error) is None:
            raise
        log.warning("%s(%s): no database connection (%r); trying again", read.__name__, args, error)
        await asyncio.sleep(1.0)
        return None


async def follow(action, group: str, channel: str) -> bool:
    """Join or leave the turn's group; False when the channel layer fails (the stream then reads the store)."""
    try:
        await action(group, channel)
        return True
    except Exception as error:
        log.warning("channel layer %s(%s) failed: %r", action.__name__, group, error)
        return False


def starter(turn_id: int):
    # Eager Celery runs the turn inside this call, so it must not hold the event loop. Enqueueing after commit
    # opens a connection (on_commit asks it for autocommit) in a pool thread: database_sync_to_async hands it back.
    return lambda: database_sync_to_async(enqueue_turn, thread_sensitive=False)(turn_id)


def chunk(completion_id: str, model: str, **fields) -> dict:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            **fields}  # fmt: skip


def wire_tool_calls(calls: list[dict], *, indexed: bool = False) -> list[dict]:
    """The client tool calls as OpenAI sends them: in a message, or (indexed) in a streamed delta."""
    return [({"index": index} if indexed else {}) | {"id": call["id"], "type": "function", "function": {
        "name": call["function"]["name"], "arguments": call["function"]["arguments"]}}
        for index, call in enumerate(calls)]  # fmt: skip


def sse_frames(event: dict, completion_id: str, model: str) -> list[dict]:
    """The SSE chunks of one turn event (none for the events a client does not see); errors are handled apart."""
    payload = event.get("payload", {})
    if event["type"] == EventType.STATUS:
        return [chunk(
            completion_id,
            model,
            choices=[],
            type="status",
            message=payload.get("message", ""),
            phase=event.get("phase", ""),
            tool_name=payload.get("tool_name"),
            arguments=payload.get("arguments"),
            recommended_tools=payload.get("recommended_tools"),
            **({"approval_id": payload["approval_id"]} if "approval_id" in payload else {}),
            **({"question_id": payload["question_id"]} if "question_id" in payload else {}),
        )]  # fmt: skip
    if event["type"] == EventType.DELTA:
        delta = {"content": payload.get("content", "")}
        return [chunk(completion_id, model, type="content", choices=[{"index": 0, "delta": delta,
                                                                      "finish_reason": None}])]  # fmt: skip
    if event["type"] == EventType.DONE:
        frames = []
        calls = payload.get("tool_calls") or []
        if calls:  # whole calls, one delta each: OpenAI's chunk shape, which clients accumulate by index
            for call in wire_tool_calls(calls, indexed=True):
                delta = {"role": "assistant", "tool_calls": [call]}
                frames.append(chunk(completion_id, model, type="content",
                                    choices=[{"index": 0, "delta": delta, "finish_reason": None}]))  # fmt: skip
        finish = "tool_calls" if calls else "stop"
        frames.append(chunk(completion_id, model, type="content",
                            choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))  # fmt: skip
        return frames
    return []


def sse_line(data) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def sse_stream(turn_id: int, model: str):
    """The turn as SSE: status and content chunks, the client's tool calls, then [DONE]; a failed turn sends
    an error frame ({"error": {...}}, as OpenAI does mid-stream) in place of the rest."""
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    failed = False
    try:
        async for event in turn_events(turn_id, start=starter(turn_id)):
            if event is KEEPALIVE:
                yield ": keep-alive\n\n"
                continue
            if failed:
                continue
            if event["type"] == EventType.ERROR:
                failed = True
                yield sse_line(failure_error(event.get("payload", {})).body())
                continue
            for frame in sse_frames(event, completion_id, model):
                yield sse_line(frame)
    except Exception:  # whatever broke the stream, the client gets an error frame and [DONE], never a cut
        log.exception("turn %s: its stream failed", turn_id)
        if not failed:
            yield sse_line(failure_error({"reason": FailureReason.INTERNAL}).body())
    yield "data: [DONE]\n\n"


async def completion(turn_id: int, model: str, prompt_tokens: int) -> dict:
    """The whole answer as a chat.completion, or the failed turn's ApiError."""
    content, done, failure = "", {}, None
    async for event in turn_events(turn_id, start=starter(turn_id)):  # read to the end: the stream then closes
        if event["type"] == EventType.DELTA:
            content += event["payload"].get("content", "")
        elif event["type"] == EventType.ERROR:
            failure = failure or failure_error(event["payload"])
        elif event["type"] == EventType.DONE:
            done = event["payload"]
    if failure is not None:
        raise failure
    completion_tokens = count_tokens(content)
    message = {"role": "assistant", "content": content}
    if done.get("tool_calls"):
        message = {"role": "assistant", "content": content or None, "tool_calls": wire_tool_calls(done["tool_calls"])}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": done.get("finish_reason", "stop")}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },  # fmt: skip
    }
