"""What traces cost a turn, and how long /metrics takes to answer; prints figures and writes
bench/results/observability-<date>.json, not a test.

(a) Builtin-model turns (the seed's query mix through agents.tasks.run_turn, the worker's task, called in-process as
turn_profile.py runs them) in six processes that differ only in traces: `off` (no OTLP endpoint), `on` (exported to
a local OTLP receiver, tests/support/otlp_receiver.py), `sampled` (the same with the SDK's own sampler keeping one
trace in ten: OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1), `sql` (`on` with a span
per SQL query: TOOLHUB_TRACE_SQL=1), `down` (the endpoint a closed port) and `slow` (a receiver that answers each
export after --slow-seconds). Each round runs one
pass of the mix in each process, in a rotating order, so the host's load falls on the six alike. Per process: the
turn's wall time and the steward's (agents.router.analyze, its span included) p50/p95 over all rounds, and the
median over rounds of each round's p50 against `off`'s (paired: the same minute of load); the spans each turn made
(by name, from the receivers), those the export queue dropped, and the process's peak memory; then, in `on`, `down`
and `slow`, 20,000 spans ended back to back (ten times the export queue): the time each took, how many were dropped
and how the memory grew.
(b) /metrics: --scrapes GETs through Django's test client (the whole middleware stack, in this process) over
--tools tools on --servers MCP servers, --turns turns of history over 30 days (--recent of them in the last hour,
each with tool calls and a budget event), and the turn queue read from the local Redis. p50/p95 of the answer,
and the p50 of each metric family.

Both on PostgreSQL, in a database of its own (toolhub_obsbench_<pid> on --postgres, created and dropped here).

    python bench/scripts/observability_bench.py [--rounds 20] [--scrapes 200] [--postgres postgresql://...]
"""

import argparse
import datetime
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench.scripts.api_bench import QUERIES  # noqa: E402
from tests.support.otlp_receiver import otlp_receiver  # noqa: E402
from tests.support.servers import EMBEDDED_UNSET, embedded_env, free_port, manage  # noqa: E402

POSTGRES = "postgresql://postgres@127.0.0.1:5432"
REDIS = "redis://127.0.0.1:6379/0"
MODES = ("off", "on", "sampled", "sql", "down", "slow")
RECEIVED = ("on", "sampled", "sql")  # the modes whose spans reach a receiver that keeps them
FLOODED = ("on", "down", "slow")
SAMPLED = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}
TOKEN = "observability-bench-token"


def pct(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (agents.console.metrics.percentile), rounded to 0.01."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--postgres", default=POSTGRES, help="the PostgreSQL server (a database of its own)")
    parser.add_argument("--redis-url", default=REDIS, help="the broker /metrics reads the turn queue from")
    parser.add_argument("--rounds", type=int, default=20, help="passes of the query mix in each process")
    parser.add_argument("--slow-seconds", type=float, default=5.0, help="the slow receiver's delay per export")
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--turns", type=int, default=20_000, help="turns of history, over 30 days")
    parser.add_argument("--recent", type=int, default=600, help="of them, started in the last hour")
    parser.add_argument("--only", choices=("turns", "metrics"), help="run one part")
    parser.add_argument("--keep-database", action="store_true", help="leave the database for a look (say its name)")
    parser.add_argument("--output", default="", help="the JSON file (default bench/results/observability-<date>.json)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    database = f"toolhub_obsbench_{os.getpid()}"
    result: dict = {"command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), "host": host()}
    with tempfile.TemporaryDirectory(prefix="obsbench-") as tmp:
        env = embedded_env(Path(tmp)) | {"DATABASE_URL": f"{args.postgres}/{database}"}
        env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
        with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {database}")
        try:
            manage(env, "setup_demo")
            if args.only != "metrics":
                result["turns"] = turn_overhead(env, rounds=args.rounds, slow_seconds=args.slow_seconds)
            if args.only != "turns":
                result["metrics"] = metrics_latency(env, args)
        finally:
            from django.conf import settings

            if settings.configured:  # part (b) ran in this process
                from django.db import connections

                connections.close_all()
            if args.keep_database:
                print(f"kept: {args.postgres}/{database}")
            else:
                with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    result["host"]["load_after"] = os.getloadavg()
    output = Path(args.output or ROOT / "bench" / "results" / f"observability-{datetime.date.today()}.json")
    output.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"written: {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}")


def host() -> dict:
    return {"cpus": os.cpu_count(), "load_before": os.getloadavg(), "python": platform.python_version(),
            "machine": platform.machine(), "kernel": platform.release()}  # fmt: skip


# --- (a) turns with traces off and on -----------------------------------------------------------------------------


def turn_overhead(env: dict, *, rounds: int, slow_seconds: float) -> dict:
    with ExitStack() as stack:
        receivers = {mode: stack.enter_context(otlp_receiver()) for mode in RECEIVED}
        slow = stack.enter_context(slow_receiver(slow_seconds))
        endpoints = {mode: receiver.endpoint for mode, receiver in receivers.items()}
        endpoints |= {"down": f"http://127.0.0.1:{free_port()}", "slow": slow.endpoint}
        children = {}
        for mode in MODES:  # one at a time: each warms up (models, indexes, the Loyalty server) before the next
            child_env = {k: v for k, v in env.items() if k != "DEBUG"} | {"DJANGO_SETTINGS_MODULE": "toolhub.settings"}
            if mode in endpoints:
                child_env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoints[mode]
            if mode == "sampled":
                child_env |= SAMPLED
            child_env["TOOLHUB_TRACE_SQL"] = "1" if mode == "sql" else "0"
            children[mode] = Child(mode, child_env)
        figures: dict[str, dict[str, list]] = {
            mode: {"turn_ms": [], "steward_ms": [], "statuses": []} for mode in MODES
        }
        round_p50: dict[str, list[float]] = {mode: [] for mode in MODES}  # each round's median turn, per process
        for round_ in range(rounds):
            for mode in MODES[round_ % len(MODES) :] + MODES[: round_ % len(MODES)]:
                answer = children[mode].ask("run")
                for key in figures[mode]:
                    figures[mode][key] += answer[key]
                round_p50[mode].append(statistics.median(answer["turn_ms"]))
            print(f"round {round_ + 1}/{rounds}", flush=True)
        stats = {mode: children[mode].ask("stats") for mode in MODES}
        for mode in FLOODED:  # after the timed rounds: ten times the export queue at once
            stats[mode] |= children[mode].ask("flood")
        for item in children.values():
            item.quit()
        received, slow_requests = {mode: receiver.received() for mode, receiver in receivers.items()}, slow.requests
    summary: dict = {"data": f"the seed's query mix ({len(QUERIES)} requests) x {rounds} rounds per process, "
                             "PostgreSQL, in-memory channel layer, builtin model", "modes": {}}  # fmt: skip
    for mode in MODES:
        turns = figures[mode]["turn_ms"]
        summary["modes"][mode] = {
            "turns": len(turns),
            "statuses": sorted(set(figures[mode]["statuses"])),
            "turn_p50_ms": pct(turns, 0.5),
            "turn_p95_ms": pct(turns, 0.95),
            "steward_p50_ms": pct(figures[mode]["steward_ms"], 0.5),
            "steward_p95_ms": pct(figures[mode]["steward_ms"], 0.95),
            **stats[mode],
        }
    for mode, every in received.items():
        spans = [span for span in every if span.name != "flood"]
        names = Counter(span.name.split(" ")[0] for span in spans)
        turns_run = len(figures[mode]["turn_ms"]) + 2 * len(QUERIES)  # the warm-up passes' spans were exported too
        summary["modes"][mode] |= {"spans_received": len(spans), "spans_received_per_turn_by_name": {
            name: round(n / turns_run, 2) for name, n in names.most_common()}}  # fmt: skip
    summary["modes"]["slow"]["exports_answered"] = slow_requests
    off = summary["modes"]["off"]
    for mode in MODES[1:]:
        traced = summary["modes"][mode]
        summary[f"{mode}_vs_off"] = {
            "turn_p50_ratio": round(traced["turn_p50_ms"] / off["turn_p50_ms"], 3),
            "turn_p95_ratio": round(traced["turn_p95_ms"] / off["turn_p95_ms"], 3),
            "steward_p50_delta_ms": round(traced["steward_p50_ms"] - off["steward_p50_ms"], 2),
            "steward_p95_delta_ms": round(traced["steward_p95_ms"] - off["steward_p95_ms"], 2),
            # Round by round (the same minute of the host's load): the median of each round's p50 ratio.
            "paired_turn_p50_ratio": round(
                statistics.median(mine / theirs for mine, theirs in zip(round_p50[mode], round_p50["off"],
                                                                         strict=True)), 3),
        }  # fmt: skip
    for mode, row in summary["modes"].items():
        print(f"{mode:>5}: turn p50 {row['turn_p50_ms']} / p95 {row['turn_p95_ms']} ms, steward p50 "
              f"{row['steward_p50_ms']} / p95 {row['steward_p95_ms']} ms, {row['spans_per_turn']} spans a turn, "
              f"{row['spans_dropped']} dropped, peak RSS {row['max_rss_mb']} MB"
              + (f"; {row['flood_spans']} spans at once: {row['flood_us_per_span']} us each, {row['flood_dropped']} "
                 f"dropped, RSS +{row['flood_rss_growth_mb']} MB" if "flood_spans" in row else ""))  # fmt: skip
    for mode in MODES[1:]:
        print(f"{mode} vs off: {summary[f'{mode}_vs_off']}")
    return summary


class Child:
    """A process running turns with one trace setting; asked for a pass or its figures over its stdin."""

    def __init__(self, mode: str, env: dict):
        self.mode = mode
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([sys.executable, __file__, "--child", mode], cwd=ROOT, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)  # fmt: skip
        self.ready = self.read()

    def read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"the {self.mode} process ended:\n{self.log.read().decode(errors='replace')[-3000:]}")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.read()

    def quit(self) -> None:
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait(timeout=30)


@contextmanager
def slow_receiver(seconds: float):
    """An OTLP/HTTP endpoint that reads each export and answers it (an empty success) only after `seconds`."""

    class Slow(ThreadingHTTPServer):
        requests = 0

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(seconds)
            Slow.requests += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format, *args):
            pass

    server = Slow(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def child(mode: str) -> None:
    """Warm up, say so, then one JSON line for each command read: `run` (a pass of the mix), `stats`, `quit`."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else prints goes to the log, never into the answers
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from opentelemetry import trace

    from agents.models import Conversation, Turn
    from agents.tasks import run_turn
    from agents.turns import runtime
    from agents.turns.start import create_turn
    from toolhub import tracing

    counts = {"ended": 0, "dropped": 0}
    if tracing.enabled():
        trace.get_tracer_provider().add_span_processor(SpanCount(counts))
        count_drops(tracing, counts)
    steward: list[float] = []
    analyze = runtime.analyze

    def timed_analyze(*args, **kwargs):
        started = time.perf_counter()
        try:
            return analyze(*args, **kwargs)
        finally:
            steward.append((time.perf_counter() - started) * 1000)

    runtime.analyze = timed_analyze
    owner = get_user_model().objects.get(username="operator")
    turns_run = 0

    def one_pass() -> dict:
        nonlocal turns_run
        steward.clear()
        walls, ids = [], []
        for text in QUERIES:
            turn = create_turn(Conversation.objects.create(owner=owner, title=text), text)
            started = time.perf_counter()
            run_turn(turn.id)  # the task's body, as a worker runs it: its invoke_agent span included
            walls.append(round((time.perf_counter() - started) * 1000, 3))
            ids.append(turn.id)
        turns_run += len(ids)
        statuses = list(Turn.objects.filter(pk__in=ids).values_list("status", flat=True))
        return {"turn_ms": walls, "steward_ms": [round(ms, 3) for ms in steward], "statuses": statuses}

    for _ in range(2):
        one_pass()
    warm_turns, counts["ended"], counts["dropped"] = turns_run, 0, 0
    print(json.dumps({"ready": mode}), file=out, flush=True)
    for command in sys.stdin:
        command = command.strip()
        if command == "run":
            print(json.dumps(one_pass()), file=out, flush=True)
        elif command == "stats":
            if mode in RECEIVED:
                tracing.force_flush(10_000)
            timed = turns_run - warm_turns
            print(json.dumps({
                "spans_per_turn": round(counts["ended"] / timed, 1) if timed else None,
                "spans_dropped": counts["dropped"],
                "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }), file=out, flush=True)  # fmt: skip
        elif command == "flood":
            print(json.dumps(flood(counts)), file=out, flush=True)
        elif command == "quit":
            break
    out.close()
    os._exit(0)  # no exit-time flush: a down or slow collector would hold it for its timeout


FLOOD_SPANS = 20_000


def flood(counts: dict) -> dict:
    """FLOOD_SPANS spans ended back to back, ten times the export queue: how long each took, how many the SDK dropped,
    and what the process's memory did meanwhile."""
    from toolhub.tracing import tracer

    dropped, rss = counts["dropped"], resident_mb()
    started = time.perf_counter()
    for _ in range(FLOOD_SPANS):
        with tracer().start_as_current_span("flood"):
            pass
    elapsed = time.perf_counter() - started
    return {
        "flood_spans": FLOOD_SPANS,
        "flood_us_per_span": round(elapsed / FLOOD_SPANS * 1e6, 1),
        "flood_dropped": counts["dropped"] - dropped,
        "flood_rss_growth_mb": round(resident_mb() - rss, 1),
    }


def resident_mb() -> float:
    """The process's resident memory now (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class SpanCount:
    """A span processor that counts the spans that ended (made by the turn's process)."""

    def __init__(self, counts: dict):
        self.counts = counts

    def on_start(self, span, parent_context=None):
        pass

    def _on_ending(self, span):
        pass

    def on_end(self, span):
        self.counts["ended"] += 1

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30000):
        return True


def count_drops(tracing, counts: dict) -> None:
    """Count each span the SDK's export queue drops (it logs that at most once in 20 s): the span that arrives while
    the queue is full (BatchProcessor.emit, the SDK's own internals)."""
    batches = tracing._processor._batches._batch_processor
    emit = batches.emit

    def counted(span):
        if len(batches._queue) == batches._max_queue_size:
            counts["dropped"] += 1
        emit(span)

    batches.emit = counted


# --- (b) /metrics with a large catalog ----------------------------------------------------------------------------


def metrics_latency(env: dict, args) -> dict:
    for name in (*EMBEDDED_UNSET, "DJANGO_SETTINGS_MODULE"):
        os.environ.pop(name, None)
    os.environ |= {
        "DATABASE_URL": env["DATABASE_URL"], "TOOLHUB_DATA_DIR": env["TOOLHUB_DATA_DIR"],
        "DJANGO_SETTINGS_MODULE": "toolhub.settings", "TOOLHUB_METRICS_TOKEN": TOKEN,
        "CELERY_BROKER_URL": args.redis_url, "TOOLHUB_CELERY_QUEUE": f"obsbench-{os.getpid()}",
    }  # fmt: skip
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    from agents.observability import metrics

    started = time.perf_counter()
    data = make_catalog_and_history(tools=args.tools, servers=args.servers, turns=args.turns, recent=args.recent)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"data: {data} ({time.perf_counter() - started:.0f} s to make)", flush=True)
    client = Client(HTTP_HOST="localhost")  # one of the embedded default's ALLOWED_HOSTS
    headers = {"Authorization": f"Bearer {TOKEN}"}
    started = time.perf_counter()  # the first scrape sums every closed day (agents/turns/rollup.py)
    assert client.get("/metrics", headers=headers).status_code == 200
    first_ms = (time.perf_counter() - started) * 1000
    from agents.models import MetricsDay

    for _ in range(4):
        assert client.get("/metrics", headers=headers).status_code == 200
    body = client.get("/metrics", headers=headers).content.decode()
    queries: list[str] = []

    def counted(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counted):
        list(metrics.collect())
    times = []
    for _ in range(args.scrapes):
        started = time.perf_counter()
        response = client.get("/metrics", headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    families: dict[str, list[float]] = {}
    for _ in range(min(args.scrapes, 50)):
        mark = time.perf_counter()
        for family in metrics.collect():
            now = time.perf_counter()
            families.setdefault(family.name, []).append((now - mark) * 1000)
            mark = now
    samples = [line for line in body.splitlines() if line and not line.startswith("#")]
    figures = {
        "data": data,
        "database": f"PostgreSQL {connection.cursor().connection.info.server_version}",
        "broker": "Redis (local), the turn queue read at each scrape",
        "how": "Django test client in the benchmark's process: middleware, view, queries, exposition; no network",
        "first_scrape_ms": round(first_ms, 1),
        "days_summed_by_it": MetricsDay.objects.count(),
        "scrapes": len(times),
        "p50_ms": pct(times, 0.5),
        "p95_ms": pct(times, 0.95),
        "max_ms": round(max(times), 2),
        "queries_per_scrape": len(queries),
        "samples": len(samples),
        "bytes": len(body),
        "family_p50_ms": {name: pct(values, 0.5) for name, values in families.items()},
    }
    print(f"/metrics: p50 {figures['p50_ms']} / p95 {figures['p95_ms']} ms over {len(times)} scrapes, "
          f"{len(queries)} queries, {len(samples)} samples; the first scrape {figures['first_scrape_ms']} ms "
          f"(summed {figures['days_summed_by_it']} closed days)")  # fmt: skip
    print("per family p50 ms:", json.dumps(figures["family_p50_ms"]))
    return figures


def make_catalog_and_history(*, tools: int, servers: int, turns: int, recent: int) -> dict:
    """`servers` MCP servers serving `tools` tools between them; `turns` finished turns over 30 days (`recent` of them
    in the last hour) on three channels, each with its routing log, two messages and fourteen events (a budget event,
    three tool results, ten deltas); a few approvals; 30 days of retention summaries."""
    import random

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from agents.models import Conversation, Message, RetentionDay, RoutingLog, ToolApproval, Turn, TurnEvent
    from catalog.models import McpServer, Tool

    rng = random.Random(37)
    per_server = tools // servers
    names = [[f"bench_s{s:03}_tool_{t:04}" for t in range(per_server)] for s in range(servers)]
    McpServer.objects.bulk_create(
        [McpServer(name=f"bench-server-{s:03}", prefix=f"bench{s:03}", command="bench-mcp", tool_names=names[s],
                   status=McpServer.Status.ERROR if s % 25 == 0 else McpServer.Status.OK) for s in range(servers)]
    )  # fmt: skip
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    Tool.objects.bulk_create(
        [Tool(name=name, description=f"Bench tool {name}.", input_schema=schema, source=Tool.Source.MCP, is_mcp=True,
              schema_tokens=60, schema_hash=name) for server in names for name in server],
        batch_size=2_000,
    )  # fmt: skip
    owner = get_user_model().objects.get(username="operator")
    conversations = Conversation.objects.bulk_create(
        [Conversation(owner=owner, channel=channel, title="bench")
         for channel in Conversation.Channel for _ in range(10)]
    )  # fmt: skip
    now = timezone.now()
    recent_times = [now - datetime.timedelta(seconds=rng.uniform(0, 3500)) for _ in range(recent)]
    old_times = [now - datetime.timedelta(seconds=rng.uniform(3700, 30 * 86400)) for _ in range(turns - recent)]
    times = recent_times + old_times
    statuses = [Turn.Status.FAILED if i % 20 == 0 else Turn.Status.DONE for i in range(turns)]
    made = Turn.objects.bulk_create(
        [Turn(conversation=conversations[i % len(conversations)], status=statuses[i], model="builtin")
         for i in range(turns)], batch_size=5_000)  # fmt: skip
    ids = [turn.pk for turn in made]
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE agents_turn t SET created_at = v.at, started_at = v.at,
                      finished_at = v.at + interval '800 milliseconds'
               FROM unnest(%s::bigint[], %s::timestamptz[]) v(id, at) WHERE t.id = v.id""",
            [ids, times],
        )
    RoutingLog.objects.bulk_create(
        [RoutingLog(turn_id=pk, query="a request", decision={"action": "read"}, steward_ms=rng.randint(4, 60),
                    turn_ms=rng.randint(40, 4000), fallback=i % 10 == 0, catalog_schema_tokens=600_000,
                    loaded_schema_tokens=900) for i, pk in enumerate(ids)], batch_size=5_000)  # fmt: skip
    Message.objects.bulk_create(
        [Message(conversation_id=conversations[i % len(conversations)].pk, turn_id=pk, role=role, content="words",
                 tokens=tokens) for i, pk in enumerate(ids) for role, tokens in (("user", 12), ("assistant", 40))],
        batch_size=5_000,
    )  # fmt: skip
    flat = [name for server in names for name in server]
    with connection.cursor() as cursor:
        # Each turn's events in the order and close together as the runtime writes them (so on the same pages): its
        # budget event, three tool results (tools picked by a hash of the turn; 600 characters of result; one in
        # twenty failed), ten deltas.
        cursor.execute(
            """INSERT INTO agents_turnevent (turn_id, sequence, type, phase, payload, created_at)
               SELECT t.id, s,
                      CASE WHEN s = 0 THEN 'routing' WHEN s <= 3 THEN 'tool_result' ELSE 'delta' END,
                      CASE WHEN s = 0 THEN 'budget' WHEN s <= 3 THEN 'tool' ELSE 'content' END,
                      CASE WHEN s = 0 THEN '{"system": 900, "tools": 1200, "knowledge": 0, "memory": 300,
                                             "reserve": 2048, "window": 8192, "free": 3744,
                                             "profile": "chat-8k"}'::jsonb
                           WHEN s <= 3 THEN jsonb_build_object('tool_name', (%(names)s::text[])[
                                                1 + abs(hashtextextended(t.id::text || '/' || s, 37)) %% %(tools)s],
                                                'arguments', jsonb_build_object('id', t.id), 'is_error', false,
                                                'refused', false, 'content', repeat('a result line. ', 40))
                                            || CASE WHEN (t.id + s) %% 20 = 0 THEN '{"is_error": true}'::jsonb
                                                    ELSE '{}'::jsonb END
                           ELSE '{"content": "a few words, "}'::jsonb END,
                      t.created_at + s * interval '20 milliseconds'
               FROM agents_turn t CROSS JOIN generate_series(0, 13) s WHERE t.id = ANY(%(ids)s)
               ORDER BY t.id, s""",
            {"names": flat, "tools": len(flat), "ids": ids},
        )
        cursor.execute("UPDATE agents_routinglog r SET created_at = t.created_at FROM agents_turn t "
                       "WHERE r.turn_id = t.id AND t.id = ANY(%s)", [ids])  # fmt: skip
    ToolApproval.objects.bulk_create(
        [ToolApproval(turn_id=ids[i], tool_call_id=f"c{i}", tool_name=flat[i], risk="high", expires_at=now,
                      status=ToolApproval.Status.APPROVED if i % 3 else ToolApproval.Status.DENIED, decided_at=now)
         for i in range(min(recent, 50))]
    )  # fmt: skip
    buckets = [3, 10, 40, 80, 120, 60, 30, 10, 4, 2, 1, 0, 0, 0, 0]
    RetentionDay.objects.bulk_create(
        [RetentionDay(day=(now - datetime.timedelta(days=31 + d)).date(), turns_done=400, turns_failed=20,
                      routing_logs=420, fallbacks=40, tokens_saved=400_000, turn_ms_buckets=buckets,
                      steward_ms_buckets=buckets) for d in range(30)]
    )  # fmt: skip
    return {"tools": Tool.objects.count(), "mcp_servers": McpServer.objects.count(), "turns": Turn.objects.count(),
            "turns_last_hour": recent, "turn_events": TurnEvent.objects.count(),
            "tool_results": TurnEvent.objects.filter(type=TurnEvent.Type.TOOL_RESULT).count(),
            "routing_logs": RoutingLog.objects.count(), "messages": Message.objects.count(),
            "retention_days": RetentionDay.objects.count()}  # fmt: skip


if __name__ == "__main__":
    main()
