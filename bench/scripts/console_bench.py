"""Console benchmark: N WebSockets over two Daphnes (Redis layer) each receive every event of a turn; prints figures.

Not a test: it asserts nothing. On a fresh PostgreSQL database (dropped
afterwards) with Redis, one Celery worker and --daphnes Daphne processes
(2 by default, sharing Redis and PostgreSQL): for each turn, N viewers open
/ws/console/<conversation>/ before the turn is enqueued, spread evenly over
the Daphnes' ports, connected to each directly (no balancer in between);
every socket must then receive one fragment per stored event, in sequence
order, none twice. Delivery latency is receipt time minus the event's
created_at (stored before commit and broadcast, so it includes both); the
first socket's latency of an event is the way to the web processes (commit,
broadcast, Redis), the spread from the first to the last socket the fan-out's
own cost, and the CPU time the Daphnes used per event (from /proc, so it
does not grow with the host's load as latencies do). Then the console pages'
render time over plain GETs.

The Daphnes run without their start-up warm-up (TOOLHUB_WARM_START=0): the
console never searches, and loading the embedding model in a thread would
hold the GIL against the sockets during the first turn. One turn watched by
one socket per Daphne runs first, unmeasured (first loads: the worker's
models, each Daphne's tiktoken encoding at its first timeline).

    .venv/bin/python bench/scripts/console_bench.py --sockets 200 --turns 3 --daphnes 2
"""

import argparse
import asyncio
import http.client
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench.scripts.load_bench import listening_pid  # noqa: E402
from tests.support.console_socket import ConsoleSocket, open_socket  # noqa: E402
from tests.support.servers import celery_worker, daphne, daphne_process, embedded_env, manage, output_of  # noqa: E402

POSTGRES = "postgresql://postgres@127.0.0.1:5432"
QUERY = "What time is it in Paris?"  # steward, routing, a tool call and result, knowledge, a streamed answer
CONNECT_BATCH = 25


def admin(sql: str) -> None:
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def setup_django(env: dict) -> None:
    os.environ.clear()
    os.environ.update(env | {"TOOLHUB_WARM_START": "0"})
    import django

    django.setup()


def pct(values: list[float], fraction: float) -> float | None:
    from agents.console.metrics import percentile

    value = percentile(values, fraction)
    return None if value is None else round(value, 1)


def in_order_once(drawn: list[int], sequences: list[int]) -> bool:
    """Every stored event drawn once, in sequence order (however the frames grouped them)."""
    return drawn == sequences


def server_cpu_seconds(bases: list[str]) -> float:
    """CPU time the Daphnes have used so far (user + system, from /proc): what the fan-out costs, at any load."""
    ticks = 0
    for base in bases:
        with open(f"/proc/{listening_pid(base)}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")


async def watch_turn(bases: list[str], session: str, sockets: int, timeout: float) -> dict:
    """Open the sockets on a new conversation, spread over the servers, run one turn, wait until every socket has
    every event."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    from agents.models import Conversation, Turn, TurnEvent
    from agents.turns.dispatch import enqueue_turn
    from agents.turns.start import create_turn

    owner = await sync_to_async(get_user_model().objects.get)(username="bench-viewer")
    turn = await sync_to_async(lambda: create_turn(Conversation.objects.create(owner=owner, title=QUERY), QUERY))()
    path = f"/ws/console/{turn.conversation_id}/"
    connect_start = time.perf_counter()
    factories: list[ConsoleSocket] = []
    for first in range(0, sockets, CONNECT_BATCH):
        batch = range(first, min(first + CONNECT_BATCH, sockets))
        factories += await asyncio.gather(*(open_socket(bases[i % len(bases)], path, session) for i in batch))
    connect_seconds = time.perf_counter() - connect_start
    deadline = time.monotonic() + 30
    while any(len(f.messages) < 1 for f in factories) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # every socket has its (empty) history snapshot
    snapshots = [len(f.messages) for f in factories]
    cpu_before = server_cpu_seconds(bases)
    await sync_to_async(enqueue_turn)(turn.id)
    deadline = time.monotonic() + timeout
    events = []
    while time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        status = await sync_to_async(lambda: Turn.objects.get(pk=turn.id).status)()
        events = await sync_to_async(
            lambda: list(TurnEvent.objects.filter(turn=turn).order_by("sequence").values_list("sequence", "created_at"))
        )()
        if status in ("done", "failed") and all(len(f.events(turn.id)) >= len(events) for f in factories):
            break
    await asyncio.sleep(0.5)  # anything extra (a duplicate) would arrive now
    cpu_seconds = server_cpu_seconds(bases) - cpu_before
    latencies, complete, extra, out_of_order, incomplete, exact = [], 0, 0, 0, [], 0
    by_sequence: dict[int, list[float]] = {}
    sequences = [sequence for sequence, _ in events]
    stored_at = {sequence: created_at.timestamp() for sequence, created_at in events}
    for factory in factories:
        drawn = factory.events(turn.id)  # after the history snapshot; a frame may carry several events
        order = [sequence for _, sequence in drawn]
        exact += in_order_once(order, sequences)
        if set(sequences) <= set(order):
            complete += 1
        else:
            incomplete.append(f"{len(set(order))}/{len(events)} events{', ' + factory.ended if factory.ended else ''}")
        extra += len(order) - len(set(order))
        out_of_order += sum(1 for before, after in zip(order, order[1:], strict=False) if after < before)
        for received, sequence in drawn:
            if sequence in stored_at:
                latencies.append((received - stored_at[sequence]) * 1000)
                by_sequence.setdefault(sequence, []).append(latencies[-1])
        await factory.close()
    await asyncio.sleep(0.5)
    return {"turn": turn.id, "events": len(events), "sockets": sockets, "complete": complete, "extra": extra,
            "in_order_once": exact,
            "out_of_order": out_of_order, "incomplete": incomplete,
            "frames": pct([len(factory.messages) - 1 for factory in factories], 0.5),
            "p50_by_sequence": {k: pct(v, 0.5) for k, v in by_sequence.items()},
            "first_by_sequence": {k: round(min(v), 1) for k, v in by_sequence.items()},
            "spreads": [max(v) - min(v) for v in by_sequence.values()],
            "snapshots_ok": all(s == 1 for s in snapshots), "latencies": latencies,
            "connect_seconds": connect_seconds, "status": status, "cpu_seconds": cpu_seconds}  # fmt: skip


def time_gets(base: str, path: str, session: str, count: int) -> list[float]:
    url = urlsplit(base)
    times = []
    for _ in range(count):
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        start = time.perf_counter()
        connection.request("GET", path, headers={"Cookie": f"sessionid={session}"})
        response = connection.getresponse()
        body = response.read()
        times.append((time.perf_counter() - start) * 1000)
        connection.close()
        if response.status != 200 or b"ws-connect" not in body:
            raise SystemExit(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=200, help="concurrent console WebSockets (default 200)")
    parser.add_argument("--turns", type=int, default=3, help="turns watched, each by fresh sockets (default 3)")
    parser.add_argument("--daphnes", type=int, default=2, help="Daphnes the sockets spread over (default 2)")
    parser.add_argument("--gets", type=int, default=50, help="GETs of each console page (default 50)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a turn may take to reach every socket")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()

    database = f"toolhub_consolebench_{os.getpid()}"
    admin(f"CREATE DATABASE {database}")
    try:
        with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
            env = embedded_env(Path(tmp)) | {
                "DATABASE_URL": f"{POSTGRES}/{database}",
                "REDIS_URL": args.redis_url,
                "TOOLHUB_CHANNEL_PREFIX": f"toolhub-consolebench-{os.getpid()}",
                "TOOLHUB_CELERY_QUEUE": f"consolebench-{os.getpid()}",
                "DJANGO_SETTINGS_MODULE": "toolhub.settings",
            }
            manage(env, "setup_demo")
            setup_django(env)
            figures = run(env, args)
    finally:
        from django.db import connections

        connections.close_all()
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    report(figures)


def run(env: dict, args) -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from toolhub.celery import app
    from toolhub.roles import VIEWER, ensure_groups

    viewer = get_user_model().objects.create_user("bench-viewer", password="a-long-bench-password")
    viewer.groups.add(ensure_groups()[VIEWER])
    client = Client()
    client.force_login(viewer)
    session = client.cookies["sessionid"].value
    load_before = os.getloadavg()[0]
    with ExitStack() as servers, celery_worker(env, app):
        bases = [servers.enter_context(daphne(env | {"TOOLHUB_WARM_START": "0"})) for _ in range(args.daphnes)]
        for base in bases:
            time_gets(base, "/console/", session, 2)  # warm the process
        # One turn unmeasured, a socket on each server: each loads tiktoken's encoding at its first timeline (1.1-1.4 s
        # on a busy host, every later event queued behind it), the worker its models at its first turn.
        asyncio.run(watch_turn(bases, session, len(bases), args.timeout))
        turns = [asyncio.run(watch_turn(bases, session, args.sockets, args.timeout)) for _ in range(args.turns)]
        conversation = f"/console/{_conversation_of(turns[-1]['turn'])}/"
        list_ms = time_gets(bases[0], "/console/", session, args.gets)
        thread_ms = time_gets(bases[0], conversation, session, args.gets)
        problems = [line for base in bases for line in output_of(daphne_process(base).log).splitlines()
                    if "ERROR" in line or "Exception" in line]  # fmt: skip
    latencies = [ms for turn in turns for ms in turn["latencies"]]
    spreads = [ms for turn in turns for ms in turn["spreads"]]
    events = sum(turn["events"] for turn in turns)
    return {
        "cpu_ms_per_event": round(sum(turn["cpu_seconds"] for turn in turns) * 1000 / events, 1) if events else None,
        "sockets": args.sockets,
        "daphnes": args.daphnes,
        "turns": [{k: v for k, v in t.items() if k not in ("latencies", "spreads")} for t in turns],
        "spread_p50": pct(spreads, 0.5),
        "spread_max": round(max(spreads), 1) if spreads else None,
        "deliveries": len(latencies),
        "latency_p50": pct(latencies, 0.5),
        "latency_p95": pct(latencies, 0.95),
        "latency_max": round(max(latencies), 1) if latencies else None,
        "list_p50": pct(list_ms, 0.5),
        "list_p95": pct(list_ms, 0.95),
        "thread_p50": pct(thread_ms, 0.5),
        "thread_p95": pct(thread_ms, 0.95),
        "gets": args.gets,
        "daphne_problems": problems[-10:],
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def _conversation_of(turn_id: int) -> int:
    from agents.models import Turn

    return Turn.objects.values_list("conversation_id", flat=True).get(pk=turn_id)


def report(f: dict) -> None:
    print(f"toolhub console benchmark: {f['sockets']} WebSockets over {f['daphnes']} Daphne process(es) (each port "
          f"directly), Redis channel layer, one Celery worker, PostgreSQL (fresh database, dropped)")  # fmt: skip
    print(f"host: {f['cpus']} CPUs, 1-min load {f['load_before']} before, {f['load_after']} after\n")
    for turn in f["turns"]:
        print(f"  turn {turn['turn']} ({turn['status']}): {turn['events']} events; "
              f"{turn['complete']}/{turn['sockets']} sockets received every one, "
              f"{turn['in_order_once']}/{turn['sockets']} each once and in order; {turn['extra']} extra and "
              f"{turn['out_of_order']} out-of-order; {turn['frames']} frames a socket (p50); history snapshot first: "
              f"{turn['snapshots_ok']}; opened in {turn['connect_seconds']:.1f} s")  # fmt: skip
        print(f"    p50 ms by event sequence: {turn['p50_by_sequence']}")
        print(f"    first socket's ms by event sequence: {turn['first_by_sequence']}")
        for socket in turn["incomplete"]:
            print(f"    incomplete socket: {socket}")
    print(f"\nDelivery latency, event stored -> fragment received ({f['deliveries']} deliveries): "
          f"p50 {f['latency_p50']} ms, p95 {f['latency_p95']} ms, max {f['latency_max']} ms")  # fmt: skip
    print(f"Fan-out spread, first socket -> last socket to receive an event: p50 {f['spread_p50']} ms, "
          f"max {f['spread_max']} ms")  # fmt: skip
    print(f"Daphne CPU from enqueue to the last delivery, all Daphnes: {f['cpu_ms_per_event']} ms per event "
          f"({f['sockets']} deliveries)")  # fmt: skip
    print(f"Page render (GET, full body, {f['gets']} each): /console/ p50 {f['list_p50']} ms, p95 {f['list_p95']} ms; "
          f"/console/<id>/ p50 {f['thread_p50']} ms, p95 {f['thread_p95']} ms")  # fmt: skip
    for line in f["daphne_problems"]:
        print(f"Daphne: {line}")


if __name__ == "__main__":
    main()
