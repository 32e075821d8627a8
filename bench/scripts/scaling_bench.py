"""Worker scaling on the scaled path: the same load through one Celery worker, then two; prints figures, not a test.

PostgreSQL (its own database, `bench_capacity`, created and dropped here), Redis (its own queue and channel prefix),
one Daphne, the demo catalog, and a scripted OpenAI-compatible model server
(tests/support/scripted_openai.py) that answers every model call after --model-ms, as a real
model's latency would. Each request's text is new (the query mix with a
reference appended), so each turn embeds its request. A worker is what the deployment runs: one
`celery worker --pool prefork --concurrency 2`. Each round runs the same load, --requests non-streaming turns from
--clients client threads, against 1 worker and then against 2 (the order alternates between rounds so a host
that gets busier does not favour one side); each phase starts its workers afresh and warms every pool process
with untimed turns first. For each phase: turns/s, the client's request time and the worker's turn time
(Turn.started_at -> finished_at) p50/p95, and the CPU seconds per turn of the workers (children included), of
Daphne and of the PostgreSQL backends of the run's database (from /proc), from which turns/s per core follow
whatever else the host runs, and each worker's resident memory with its pool processes. Last, the rows and bytes
per turn of the run's database (manage.py storage_per_turn).

    python bench/scripts/scaling_bench.py [--requests 120] [--clients 16] [--model-ms 1000] [--rounds 3]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--redis-url redis://127.0.0.1:6379/0]
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from celery import Celery  # noqa: E402

from bench.scripts.api_bench import QUERIES, send_turn, setup_django  # noqa: E402
from bench.scripts.load_bench import listening_pid, process_tree, resources, run_workers, worker_pids  # noqa: E402
from tests.support.scripted_openai import ScriptedOpenAI  # noqa: E402
from tests.support.servers import celery_worker, daphne, embedded_env, manage  # noqa: E402

DATABASE = "bench_capacity"
WORKER_CONCURRENCY = 2  # as deploy's workers run (TOOLHUB_WORKER_CONCURRENCY)
TICKS = os.sysconf("SC_CLK_TCK")
ANSWER = {"content": "Here is the answer the scripted model gives every turn."}


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each live process, children it waited for included."""
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = sum(int(value) for value in fields[11:15]) / TICKS  # utime stime cutime cstime
    return seconds


class CpuMeter:
    """CPU seconds that a group of processes spent between `start()` and `stop()`; a process that appeared
    meanwhile counts whole, one that ended meanwhile counts up to its last reading."""

    def __init__(self, pids):
        self.pids = pids  # a callable: the group's pids now

    def start(self) -> None:
        self.before = cpu_seconds(self.pids())

    def stop(self) -> float:
        after = cpu_seconds(self.pids())
        return sum(after[pid] - self.before.get(pid, 0.0) for pid in after)


def backend_pids(postgres: str) -> list[int]:
    with psycopg.connect(f"{postgres}/postgres", autocommit=True) as connection:
        rows = connection.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [DATABASE]).fetchall()
    return [pid for (pid,) in rows]


def worker_turn_ms(postgres: str, since: datetime.datetime) -> list[float]:
    """Time in the worker (started_at -> finished_at) of the turns that finished after `since`."""
    with psycopg.connect(f"{postgres}/{DATABASE}") as connection:
        rows = connection.execute(
            "SELECT extract(epoch FROM finished_at - started_at) * 1000 FROM agents_turn "
            "WHERE finished_at > %s AND started_at IS NOT NULL",
            [since],
        ).fetchall()
    return [float(ms) for (ms,) in rows]


def send_all(base: str, key: str, count: int, clients: int, timeout: float) -> tuple[list[dict], float]:
    """`count` turns from `clients` threads; each request's text is new (a reference appended to the query mix), so
    every turn embeds its own request as real traffic does, instead of finding it memoised by an earlier turn."""

    def one(i: int) -> dict:
        return send_turn(base, key, f"{QUERIES[i % len(QUERIES)]} (ref {uuid.uuid4().hex[:8]})", stream=False,
                         timeout=timeout)  # fmt: skip

    with ThreadPoolExecutor(clients) as pool:
        start = time.perf_counter()
        results = list(pool.map(one, range(count)))
        return results, time.perf_counter() - start


def phase(workers: int, *, env: dict, base: str, key: str, app: Celery, args) -> dict:
    """`args.requests` turns through `workers` fresh workers, after one untimed turn per pool process."""
    with ExitStack() as stack:
        for _ in range(workers):
            stack.enter_context(celery_worker(env, app, pool="prefork", concurrency=WORKER_CONCURRENCY))
        slots = workers * WORKER_CONCURRENCY
        send_all(base, key, 2 * slots, slots, args.timeout)  # every pool process has built its indexes
        daphne_pid = listening_pid(base)
        meters = {
            "workers": CpuMeter(lambda: worker_pids(app)),
            "daphne": CpuMeter(lambda: [daphne_pid] if daphne_pid else []),
            "postgres": CpuMeter(lambda: backend_pids(args.postgres)),
        }
        for meter in meters.values():
            meter.start()
        load_before, since = os.getloadavg()[0], datetime.datetime.now(datetime.UTC)
        results, seconds = send_all(base, key, args.requests, args.clients, args.timeout)
        cpu = {name: meter.stop() for name, meter in meters.items()}
        load_after = os.getloadavg()[0]
        memory = [resources(pids[0]) | {"processes": len(process_tree(pids[0]))} for pids in run_workers(app)]
    good = [r for r in results if "error" not in r]
    in_worker = worker_turn_ms(args.postgres, since)
    request_ms = [r["turn_ms"] for r in good]
    return {
        "workers": workers,
        "completed": len(good),
        "errors": len(results) - len(good),
        "error_samples": sorted({r["error"][:160] for r in results if "error" in r})[:3],
        "seconds": round(seconds, 2),
        "turns_per_s": round(len(good) / seconds, 2),
        "request_ms_p50_p95": [ms(request_ms, 0.5), ms(request_ms, 0.95)],
        "worker_turn_ms_p50_p95": [ms(in_worker, 0.5), ms(in_worker, 0.95)],
        "cpu_ms_per_turn": {name: round(1000 * value / max(len(good), 1), 1) for name, value in cpu.items()},
        "load_1m": [round(load_before, 2), round(load_after, 2)],
        "worker_rss_mb": [m["rss_mb"] for m in memory],  # each worker with its pool processes
        "worker_processes": [m["processes"] for m in memory],
    }


def ms(values: list[float], fraction: float) -> int | None:
    from agents.console.metrics import percentile  # after setup_django

    value = percentile(values, fraction)
    return None if value is None else round(value)


def admin(postgres: str, sql: str) -> None:
    with psycopg.connect(f"{postgres}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def run(args) -> dict:
    admin(args.postgres, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    admin(args.postgres, f"CREATE DATABASE {DATABASE}")
    figures: dict = {"requests": args.requests, "clients": args.clients, "model_ms": args.model_ms,
                     "worker": f"prefork, concurrency {WORKER_CONCURRENCY}", "cpus": os.cpu_count(),
                     "phases": []}  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(prefix="scaling-bench-") as data_dir, ScriptedOpenAI() as model:
            model.behaviour, model.delay, model.every_step = "slow", args.model_ms / 1000, ANSWER
            env = embedded_env(Path(data_dir))
            env.pop("DEBUG")  # as deployed: debug keeps every query of a request
            env |= {"DATABASE_URL": f"{args.postgres}/{DATABASE}", "REDIS_URL": args.redis_url,
                    "TOOLHUB_CHANNEL_PREFIX": f"toolhub-capacity-{os.getpid()}",
                    "TOOLHUB_CELERY_QUEUE": f"toolhub-capacity-{os.getpid()}",
                    "TOOLHUB_MODEL_BASE_URL": model.base_url, "TOOLHUB_MODEL": "scripted-model",
                    "TOOLHUB_RATE_LIMIT_PER_MINUTE": "0", "TOOLHUB_USER_RATE_LIMIT_PER_MINUTE": "0"}  # fmt: skip
            setup_django(Path(data_dir))  # ms() reads agents.console.metrics
            manage(env, "setup_demo")  # stores the vectors of the demo's tools and examples in the database
            key = manage(env, "create_api_key", "scaling-bench").strip().splitlines()[-1]
            env.pop("TOOLHUB_VECTOR_CACHE", None)  # the servers share vectors through the database, as deployed
            app = Celery("scaling_bench", broker=args.redis_url)
            try:
                with daphne(env) as base:
                    for round_number in range(args.rounds):
                        for workers in (1, 2) if round_number % 2 == 0 else (2, 1):
                            result = phase(workers, env=env, base=base, key=key, app=app, args=args)
                            figures["phases"].append(result | {"round": round_number + 1})
                            print(json.dumps(figures["phases"][-1]), flush=True)
            finally:
                app.close()
            figures["model_calls"] = len(model.requests)
            figures["storage"] = json.loads(manage(env, "storage_per_turn").strip().splitlines()[-1])
    finally:
        admin(args.postgres, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    return figures


def report(f: dict) -> None:
    print(f"toolhub scaling benchmark: {f['requests']} non-streaming turns from {f['clients']} client threads per "
          f"phase, scripted model answering after {f['model_ms']} ms, workers {f['worker']}, 1 Daphne, "
          f"{f['cpus']} CPUs")  # fmt: skip
    print(f"{'round':>5} {'workers':>7} {'turns/s':>8} {'request p50/p95 ms':>19} {'worker turn p50/p95 ms':>23} "
          f"{'CPU ms/turn workers/daphne/pg':>30} {'load 1m':>12} errors")  # fmt: skip
    for p in f["phases"]:
        cpu = p["cpu_ms_per_turn"]
        request, worker, load = (pair(p[k]) for k in ("request_ms_p50_p95", "worker_turn_ms_p50_p95", "load_1m"))
        cpu_text = f"{cpu['workers']} / {cpu['daphne']} / {cpu['postgres']}"
        print(f"{p['round']:>5} {p['workers']:>7} {p['turns_per_s']:>8} {request:>19} {worker:>23} {cpu_text:>30} "
              f"{load:>12} {p['errors']}")  # fmt: skip
        for sample in p["error_samples"]:
            print(f"      error: {sample}")
    ratios = []
    for number in sorted({p["round"] for p in f["phases"]}):
        by_workers = {p["workers"]: p["turns_per_s"] for p in f["phases"] if p["round"] == number}
        ratios.append(round(by_workers[2] / by_workers[1], 2))
    f["ratios"] = ratios
    print(f"two workers / one worker, turns/s per round: {ratios} (min {min(ratios)}, max {max(ratios)})")
    s = f["storage"]
    print(
        f"storage after {s['turns']} turns: {s['bytes_per_turn']} bytes a turn; "
        + ", ".join(f"{t} {v['rows_per_turn']} rows / {v['bytes_per_turn']} B" for t, v in s["tables"].items())
    )
    print(json.dumps(f))


def pair(values) -> str:
    return f"{values[0]} / {values[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=120, help="timed turns per phase (120)")
    parser.add_argument("--clients", type=int, default=16, help="client threads sending them (16)")
    parser.add_argument("--model-ms", type=float, default=1000, help="the scripted model's latency per call (1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (1 worker, 2 workers) (3)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a request may take (300)")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server, no database")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    if args.requests < 1 or args.clients < 1 or args.model_ms < 0 or args.rounds < 1:
        parser.error("--requests, --clients and --rounds must be at least 1, --model-ms 0 or more")
    report(run(args))


if __name__ == "__main__":
    main()
