"""Where a builtin-model turn's time goes in the process that runs it; prints figures, not a test.

Sets up the demo in a temporary data directory (the embedded default: SQLite), or with --postgres in a database of
its own on that server (created and dropped here) and with --redis-url on the Redis channel layer, as the scaled
path runs; then runs the seed's query mix through agents.turns.runtime.run_turn in this
process under cProfile, and prints per turn: wall time, SQL queries, events, and the time inside each stage
(steward, model loop, tool calls with the MCP round trips, event writes and broadcasts, the budget records,
learning). The first pass warms the process (models, indexes, the Loyalty server's start) and is not counted.

    python bench/scripts/turn_profile.py [--passes 5] [--postgres postgresql://postgres@127.0.0.1:5432]
        [--redis-url redis://127.0.0.1:6379/0]
"""

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench.scripts.api_bench import QUERIES  # noqa: E402
from tests.support.servers import EMBEDDED_UNSET, embedded_env, manage  # noqa: E402

# (label, file suffix, function name): cumulative time inside each, per turn.
STAGES = (
    ("steward (routing)", "agents/turns/runtime.py", "consult_steward"),
    ("model loop (builtin model, tools)", "agents/turns/runtime.py", "model_loop"),
    ("tool calls", "agents/turns/tool_calls.py", "execute"),
    ("event writes", "agents/turns/events.py", "emit"),
    ("event broadcasts", "agents/turns/events.py", "broadcast"),
    ("budget records", "agents/turns/runtime.py", "record_budget"),
    ("learning from the turn", "agents/turns/learning.py", "learn_from_turn"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=5, help="timed passes over the query mix (default 5)")
    parser.add_argument("--postgres", default="", help="a PostgreSQL server to profile on (a database of its own)")
    parser.add_argument("--redis-url", default="", help="broadcast through Redis as the scaled path does")
    parser.add_argument("--top", type=int, default=0, help="also print the profile's top N functions by own time")
    parser.add_argument("--show-sql", action="store_true", help="also print every query of one more turn per request")
    args = parser.parse_args()
    database = f"turn_profile_{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="turn-profile-") as tmp:
        env = embedded_env(Path(tmp))
        if args.postgres:
            with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {database}")
            env["DATABASE_URL"] = f"{args.postgres}/{database}"
        if args.redis_url:
            env |= {"REDIS_URL": args.redis_url, "TOOLHUB_CHANNEL_PREFIX": f"turn-profile-{os.getpid()}"}
        try:
            manage(env, "setup_demo")
            for name in (*EMBEDDED_UNSET, "DJANGO_SETTINGS_MODULE"):
                os.environ.pop(name, None)
            os.environ |= {k: v for k, v in env.items() if k in ("DATABASE_URL", "REDIS_URL", "TOOLHUB_CHANNEL_PREFIX",
                                                                   "TOOLHUB_DATA_DIR", "DEBUG")}  # fmt: skip
            os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
            import django

            django.setup()
            profile(args.passes, args.top, args.show_sql)
        finally:
            if args.postgres:
                from django.db import connections

                connections.close_all()
                with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


# (label, file suffix, function name): a query counts for the innermost of these on its stack (else "other").
QUERY_STAGES = (
    ("turn setup (create_turn, the test's conversation)", "bench/scripts/turn_profile.py", "one"),
    ("claim", "agents/turns/runtime.py", "claim"),
    ("run: load conversation, profile, catalog", "agents/turns/runtime.py", "run"),
    ("steward (routing)", "agents/turns/runtime.py", "consult_steward"),
    ("bundle", "agents/turns/runtime.py", "build"),
    ("routing log", "agents/turns/routing_log.py", "record_analysis"),
    ("routing log", "agents/turns/routing_log.py", "record_outcome"),
    ("knowledge", "catalog/knowledge/registry.py", "select_snippets"),
    ("tool calls", "agents/turns/tool_calls.py", "execute"),
    ("message writes", "agents/turns/runtime.py", "save_message"),
    ("event writes", "agents/turns/events.py", "emit"),
    ("learning from the turn", "agents/turns/learning.py", "learn_from_turn"),
)


def query_stage(stack) -> str:
    for frame in stack:  # innermost first
        for label, suffix, name in QUERY_STAGES:
            if frame.f_code.co_name == name and frame.f_code.co_filename.endswith(suffix):
                return label
    return "other"


class QueryCounter:
    """A database execute wrapper: each query's kind (SELECT, INSERT, ...) under the stage that ran it."""

    def __init__(self, *, keep: bool = False):
        self.counts: dict[tuple[str, str], int] = {}
        self.queries: list[tuple[str, str]] | None = [] if keep else None

    def __call__(self, execute, sql, params, many, context):
        frames, frame = [], sys._getframe(1)
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        key = (query_stage(frames), sql.split(None, 1)[0].upper())
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.queries is not None:
            self.queries.append((key[0], sql))
        return execute(sql, params, many, context)

    def report(self, turns: int) -> None:
        print("SQL queries per turn, by stage (the innermost on the stack) and kind:")
        stages = dict.fromkeys(stage for stage, _kind in sorted(self.counts))
        for stage in stages:
            kinds = {kind: n for (s, kind), n in self.counts.items() if s == stage}
            detail = ", ".join(f"{kind} {n / turns:.1f}" for kind, n in sorted(kinds.items()))
            print(f"  {stage:<52} {sum(kinds.values()) / turns:5.1f}  ({detail})")
        kinds = {}
        for (_stage, kind), n in self.counts.items():
            kinds[kind] = kinds.get(kind, 0) + n
        print("  all: " + ", ".join(f"{kind} {n / turns:.1f}" for kind, n in sorted(kinds.items())))


def profile(passes: int, top: int = 0, show_sql: bool = False) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents.models import Conversation, Turn, TurnEvent
    from agents.turns.runtime import run_turn
    from agents.turns.start import create_turn

    owner = get_user_model().objects.get(username="operator")

    def one(text: str) -> int:
        conversation = Conversation.objects.create(owner=owner, title=text)
        turn = create_turn(conversation, text)
        run_turn(turn.id)
        return turn.id

    for text in QUERIES:  # warm: models, indexes, the Loyalty server's process
        one(text)
    turns, started, cpu = [], time.perf_counter(), time.process_time()
    for _ in range(passes):  # unprofiled: a turn's wall and CPU time as it runs
        turns.extend(one(text) for text in QUERIES)
    plain_wall, plain_cpu = time.perf_counter() - started, time.process_time() - cpu
    counter = QueryCounter()
    with connection.execute_wrapper(counter):
        for _ in range(passes):
            turns.extend(one(text) for text in QUERIES)
    profiler, turns, started = cProfile.Profile(), [], time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        profiler.enable()
        for _ in range(passes):
            turns.extend(one(text) for text in QUERIES)
        profiler.disable()
    wall = time.perf_counter() - started
    statuses = set(Turn.objects.filter(pk__in=turns).values_list("status", flat=True))
    events = TurnEvent.objects.filter(turn_id__in=turns).count()
    stats = pstats.Stats(profiler).stats
    count = len(turns)
    print(
        f"data: the seed's query mix ({len(QUERIES)} requests) x {passes}, {count} turns, statuses {sorted(statuses)}"
    )
    layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory"
    print(f"channel layer: {layer}; database: {connection.vendor}")
    print(f"per turn, unprofiled: {plain_wall / count * 1000:.1f} ms wall, {plain_cpu / count * 1000:.1f} ms CPU of "
          f"this process")  # fmt: skip
    logged: dict[str, int] = {}  # as Django logs them: statements, and BEGIN/COMMIT of each transaction
    for query in queries.captured_queries:
        kind = query["sql"].split(None, 1)[0].upper()
        logged[kind] = logged.get(kind, 0) + 1
    print(f"per turn, profiled: {wall / count * 1000:.1f} ms wall, {len(queries) / count:.1f} SQL commands as "
          f"Django logs them (" + ", ".join(f"{kind} {n / count:.1f}" for kind, n in sorted(logged.items()))
          + f"), {events / count:.1f} events")  # fmt: skip
    for label, suffix, name in STAGES:
        total = sum(s[3] for (path, _line, func), s in stats.items() if func == name and path.endswith(suffix))
        print(f"  {label:<36} {total / count * 1000:7.1f} ms")
    counter.report(count)
    kinds = TurnEvent.objects.filter(turn_id__in=turns).values_list("type", "phase")
    tally: dict[str, int] = {}
    for kind, phase in kinds:
        tally[f"{kind}/{phase}"] = tally.get(f"{kind}/{phase}", 0) + 1
    print("events per turn: " + ", ".join(f"{name} {n / count:.1f}" for name, n in sorted(tally.items())))
    if top:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(top)
    if show_sql:
        for text in QUERIES:
            counter = QueryCounter(keep=True)
            with connection.execute_wrapper(counter):
                one(text)
            print(f"-- {text!r}: {len(counter.queries)} queries")
            for stage, sql in counter.queries:
                print(f"  [{stage}] {sql[:220]}")


if __name__ == "__main__":
    main()
