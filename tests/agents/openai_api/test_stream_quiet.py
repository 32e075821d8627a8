"""A streamed turn's quiet spells (agents.openai_api.completions.turn_events): the store is read less often the
longer nothing happens, and an event the channel layer never delivered still reaches the stream from the store."""

import asyncio
import time

import pytest
from channels.db import database_sync_to_async

from agents.models import Conversation, TurnEvent
from agents.openai_api import completions
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db(transaction=True)  # the stream reads the store from a worker thread


def test_a_quiet_stream_reads_the_store_less_often_and_still_finds_what_the_layer_lost(monkeypatch):
    turn = create_turn(Conversation.objects.create(owner=make_user()), "hi")
    reads: list[float] = []
    stored = completions.stored_events

    def counted(turn_id, *, after=0):
        reads.append(time.monotonic())
        return stored(turn_id, after=after)

    monkeypatch.setattr(completions, "stored_events", counted)
    monkeypatch.setattr(completions.watchdog, "take_over", lambda turn_id: None)  # the turn is left queued
    monkeypatch.setattr(completions, "KEEPALIVE_SECONDS", 0.8)
    monkeypatch.setattr(completions, "QUIET_FIRST_SECONDS", 0.05)

    def store_unannounced(sequence: int, type: str) -> None:  # in the store, never sent on the channel layer
        TurnEvent.objects.create(turn_id=turn.id, sequence=sequence, type=type, payload={"content": "x"})

    async def scenario():
        async def start():
            return None

        stream = completions.turn_events(turn.id, start=start)
        started = time.monotonic()
        assert await anext(stream) is completions.KEEPALIVE  # nothing for 0.8 s
        quiet_reads = [moment for moment in reads if moment - started < 0.8]
        await database_sync_to_async(store_unannounced)(1, TurnEvent.Type.DELTA)
        await database_sync_to_async(store_unannounced)(2, TurnEvent.Type.DONE)
        stored_at = time.monotonic()
        seen = [await asyncio.wait_for(anext(stream), 5) for _ in range(2)]
        return quiet_reads, seen, time.monotonic() - stored_at

    quiet_reads, seen, found_after = asyncio.run(scenario())
    # Waits of 0.05, 0.1, 0.2, 0.4 s, the last cut at the keep-alive: about 5 reads, where a read every 0.05 s
    # of quiet would have been 16.
    assert 3 <= len(quiet_reads) <= 7, quiet_reads
    assert [(event["sequence"], event["type"]) for event in seen] == [(1, "delta"), (2, "done")]
    assert found_after < 2.5  # within a keep-alive interval (0.8 s here), on a loaded host too
