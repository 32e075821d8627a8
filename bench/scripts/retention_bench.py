"""Retention benchmark on PostgreSQL: 1,000,000 old TurnEvents removed while a turn writes; figures, not a test.

Runs against a fresh database toolhub_retbench_<pid> (created, migrated with manage.py, dropped at the end).
Old data: --turns finished turns 40 days old with --events-per-turn events each (1,000,000 by default), two
messages and a routing log each, plus 1,000 recent turns that must stay. Then apply_retention runs (the
function the beat task and manage.py apply_retention call) while a writer thread plays a running turn: it
appends an event and beats its turn's heartbeat every 10 ms, each in its own transaction, and times each
write, and pg_stat_activity is sampled for sessions waiting on a lock. The same writer is timed alone first
for comparison. The last line printed is one JSON object.
"""

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.scripts.workflow_bench import POSTGRES, admin, setup_django  # noqa: E402

RECENT_TURNS = 1_000


def insert_turns(conversation, count: int, *, days_ago: int, events_per_turn: int) -> None:
    """`count` done turns `days_ago` days old with their events (one INSERT ... SELECT), messages and logs."""
    import datetime

    from django.db import connection
    from django.utils import timezone

    from agents.models import Message, RoutingLog, Turn

    when = timezone.now() - datetime.timedelta(days=days_ago)
    turns = Turn.objects.bulk_create(
        [Turn(conversation=conversation, status=Turn.Status.DONE, started_at=when, finished_at=when)
         for _ in range(count)], batch_size=5_000)  # fmt: skip
    ids = [turn.pk for turn in turns]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE agents_turn SET created_at = %s WHERE id = ANY(%s)", [when, ids])
        # A streamed answer's delta events, as the runtime stores them (about 60 bytes of payload each).
        cursor.execute(
            """INSERT INTO agents_turnevent (turn_id, sequence, type, phase, payload, created_at)
               SELECT t.id, s, 'delta', '', '{"text": "a few words of a streamed answer, "}'::jsonb, %s
               FROM agents_turn t CROSS JOIN generate_series(0, %s) s WHERE t.id = ANY(%s)""",
            [when, events_per_turn - 1, ids],
        )
    Message.objects.bulk_create(
        [Message(conversation=conversation, turn_id=pk, role=role, content="a question and its answer", tokens=8)
         for pk in ids for role in ("user", "assistant")], batch_size=5_000)  # fmt: skip
    RoutingLog.objects.bulk_create(
        [RoutingLog(turn_id=pk, query="a question", decision={"action": "answer"}, steward_ms=40, turn_ms=900,
                    catalog_schema_tokens=4000, loaded_schema_tokens=600) for pk in ids], batch_size=5_000)  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agents_routinglog SET created_at = %s WHERE turn_id = ANY(%s)", [when, ids]
        )  # fmt: skip


class TurnWriter(threading.Thread):
    """A running turn: one event plus a heartbeat every `interval` seconds, each its own transaction; times each."""

    def __init__(self, conversation, interval: float = 0.01):
        super().__init__(daemon=True)
        self.conversation, self.interval = conversation, interval
        self.latencies_ms: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from django.db import connection, transaction
        from django.utils import timezone

        from agents.models import Turn, TurnEvent

        turn = Turn.objects.create(conversation=self.conversation, status=Turn.Status.RUNNING)
        sequence = 0
        try:
            while not self.stop.is_set():
                start = time.perf_counter()
                with transaction.atomic():
                    TurnEvent.objects.create(turn=turn, sequence=sequence, type=TurnEvent.Type.DELTA,
                                             payload={"text": "live "})  # fmt: skip
                    Turn.objects.filter(pk=turn.pk).update(heartbeat_at=timezone.now())
                self.latencies_ms.append((time.perf_counter() - start) * 1000)
                sequence += 1
                time.sleep(self.interval)
        finally:
            connection.close()


class LockWatcher(threading.Thread):
    """Samples pg_stat_activity every 5 ms: how many of this database's sessions wait on a lock (at most)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = self.max_waiting = 0
        self.stop = threading.Event()

    def run(self) -> None:
        from django.db import connection

        try:
            with connection.cursor() as cursor:
                while not self.stop.is_set():
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock'"
                    )
                    self.max_waiting = max(self.max_waiting, cursor.fetchone()[0])
                    self.samples += 1
                    time.sleep(0.005)
        finally:
            connection.close()


def writes(latencies: list[float]) -> dict:
    from agents.console.metrics import percentile

    return {
        "writes": len(latencies),
        "p50_ms": round(percentile(latencies, 0.50), 2),
        "p95_ms": round(percentile(latencies, 0.95), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=25_000, help="old finished turns")
    parser.add_argument("--events-per-turn", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=None, help="turns per batch (TOOLHUB_RETENTION_BATCH)")
    args = parser.parse_args()

    database = f"toolhub_retbench_{os.getpid()}"
    admin(f"CREATE DATABASE {database}")
    figures: dict = {"database": database, "cpus": os.cpu_count(), "load_1m_before": round(os.getloadavg()[0], 2)}
    try:
        setup_django(f"{POSTGRES}/{database}")
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db import connection, connections

        from agents.models import Conversation, RetentionDay, Turn, TurnEvent
        from agents.turns.retention import apply_retention

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            figures["postgresql"] = cursor.fetchone()[0]
        owner = get_user_model().objects.create(username="bench")
        old_conversation, live_conversation = (Conversation.objects.create(owner=owner) for _ in range(2))

        start = time.perf_counter()
        insert_turns(old_conversation, args.turns, days_ago=40, events_per_turn=args.events_per_turn)
        insert_turns(old_conversation, RECENT_TURNS, days_ago=2, events_per_turn=args.events_per_turn)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # what autovacuum would have done by the time beat runs
        old_events = args.turns * args.events_per_turn
        figures |= {
            "old_turns": args.turns,
            "old_events": old_events,
            "insert_s": round(time.perf_counter() - start, 1),
            "batch_size": args.batch_size or settings.TOOLHUB_RETENTION_BATCH,
        }

        alone = TurnWriter(live_conversation)
        alone.start()
        time.sleep(5)
        alone.stop.set()
        alone.join()
        figures["writer_alone"] = writes(alone.latencies_ms)

        during, locks = TurnWriter(live_conversation), LockWatcher()
        during.start()
        locks.start()
        figures["load_1m_at_start"] = round(os.getloadavg()[0], 2)
        start = time.perf_counter()
        result = apply_retention(days=30, batch_size=args.batch_size)
        seconds = time.perf_counter() - start
        during.stop.set()
        locks.stop.set()
        during.join()
        locks.join()
        figures["writer_during_retention"] = writes(during.latencies_ms)
        figures["lock_waits"] = {"samples": locks.samples, "max_sessions_waiting": locks.max_waiting}
        removed = result.turns + result.events + result.messages + result.routing_logs
        figures["retention"] = result.as_dict() | {
            "seconds": round(seconds, 1),
            "events_per_s": round(result.events / seconds),
            "rows_per_s": round(removed / seconds),
            "mean_batch_ms": round(seconds * 1000 / max(result.batches, 1)),
        }
        summary = RetentionDay.objects.get()
        assert result.events == old_events and summary.events == old_events, (result, summary.events)
        assert Turn.objects.filter(conversation=old_conversation).count() == RECENT_TURNS
        assert TurnEvent.objects.filter(turn__conversation=live_conversation).count() == len(alone.latencies_ms) + len(
            during.latencies_ms
        )
        figures["load_1m_after"] = round(os.getloadavg()[0], 2)
        connections.close_all()
    finally:
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    report(figures)


def report(f: dict) -> None:
    r = f["retention"]
    print(f"toolhub retention benchmark on PostgreSQL {f['postgresql']} (fresh database {f['database']}, dropped)")
    print(f"host: {f['cpus']} CPUs, 1-min load {f['load_1m_before']} before, {f['load_1m_after']} after")
    print(f"old data: {f['old_turns']:,} finished turns, {f['old_events']:,} events (inserted in {f['insert_s']} s)")
    print(f"retention: {r['events']:,} events, {r['turns']:,} turns, {r['messages']:,} messages, "
          f"{r['routing_logs']:,} routing logs in {r['seconds']} s ({r['events_per_s']:,} events/s, "
          f"{r['rows_per_s']:,} rows/s; {r['batches']} batches of {f['batch_size']} turns, "
          f"{r['mean_batch_ms']} ms each)")  # fmt: skip
    for name in ("writer_alone", "writer_during_retention"):
        w = f[name]
        print(f"{name.replace('_', ' ')}: {w['writes']} writes, p50 {w['p50_ms']} ms, p95 {w['p95_ms']} ms, "
              f"p99 {w['p99_ms']} ms, max {w['max_ms']} ms")  # fmt: skip
    print(f"sessions waiting on a lock during retention: at most {f['lock_waits']['max_sessions_waiting']} "
          f"({f['lock_waits']['samples']} samples of pg_stat_activity)")  # fmt: skip
    print(json.dumps(f))


if __name__ == "__main__":
    main()
