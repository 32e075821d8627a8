"""Load and soak benchmark on the scaled path; prints figures, not a test.

PostgreSQL (a database of the run's own, created and dropped here; the server keeps its own max_connections),
Redis, one Celery worker (prefork, concurrency 2), one Daphne (listen backlog 1024), the builtin offline model and
the demo catalog. After a warm-up: --concurrent streaming requests at once, then as many non-streaming ones at once;
for each, how many completed, the errors, p50/p95 time to the first frame (streamed) and to [DONE] (or the whole
answer), and the peak of the run's PostgreSQL connections. Then a soak: --soak-rate streamed requests a second for
--soak-seconds, reporting PostgreSQL connections (least and most), open file descriptors and resident memory of
Daphne and of the worker (its children counted in) at the start and at the end. Rate limits are off for the run:
one key sends everything. Every request goes to loopback and the run stops by itself.

    python bench/scripts/load_bench.py [--concurrent 200] [--soak-seconds 600] [--soak-rate 2]
        [--postgres postgresql://postgres@127.0.0.1:5432] [--redis-url redis://127.0.0.1:6379/0]
"""

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from celery import Celery  # noqa: E402

from bench.scripts.api_bench import QUERIES, WARM_UP_QUERIES, send_turn, setup_django  # noqa: E402
from tests.support.servers import celery_worker, daphne, embedded_env, manage  # noqa: E402

MAX_CONCURRENT = 400  # client threads; PostgreSQL's connections are bounded by the pools, not by this
WORKER_CONCURRENCY = 2


class ConnectionCounter:
    """Samples the run's database's connections in pg_stat_activity every 200 ms; `take()` gives (least, most)
    since the last take."""

    def __init__(self, postgres: str, database: str):
        self.dsn, self.database = f"{postgres}/postgres", database
        self.samples: list[int] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def watch(self) -> None:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
        with psycopg.connect(self.dsn, autocommit=True) as connection:  # on another database: not counted
            while not self.stop.wait(0.2):
                count = connection.execute(query, [self.database]).fetchone()[0]
                with self.lock:
                    self.samples.append(count)

    def take(self) -> tuple[int | None, int | None]:
        with self.lock:
            samples, self.samples = self.samples, []
        return (min(samples), max(samples)) if samples else (None, None)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=10)


def process_tree(pid: int) -> list[int]:
    """`pid` and its children (a prefork worker's pool processes)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                children.append(int(entry.name))
    return [pid, *children]


def resources(pid: int) -> dict:
    """Open file descriptors and resident memory (MB) of the process and its children."""
    fds, rss_kb = 0, 0
    for member in process_tree(pid):
        try:
            fds += len(os.listdir(f"/proc/{member}/fd"))
            status = Path(f"/proc/{member}/status").read_text()
            rss_kb += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
        except (OSError, StopIteration):
            continue
    return {"fds": fds, "rss_mb": round(rss_kb / 1024, 1)}


def run_workers(app: Celery) -> list[list[int]]:
    """Each of this run's workers as its main process's pid, then its pool processes' (from the workers' own stats;
    a worker is a fork of the test fork server, not a child of the process `celery_worker` started)."""
    prefix = f"itest-{os.getpid()}-"
    return [
        [int(stats["pid"]), *(int(pid) for pid in stats["pool"].get("processes", []))]
        for name, stats in sorted((app.control.inspect(timeout=2).stats() or {}).items())
        if name.startswith(prefix)
    ]


def worker_pids(app: Celery) -> list[int]:
    """The pids of this run's workers and their pool processes."""
    return [pid for worker in run_workers(app) for pid in worker]


def listening_pid(base_url: str) -> int | None:
    """The process that listens on the loopback TCP port of `base_url` (Daphne is a fork of the test fork server,
    not a child of the launcher `daphne()` starts)."""
    port = urlsplit(base_url).port
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":  # LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                    return int(entry.name)
            except OSError:
                continue
    return None


def host_busy_seconds() -> float:
    """CPU time the whole host spent busy (every process, other jobs' too), in seconds."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of these processes, in seconds (a pool process that ended is not counted)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def burst(base: str, key: str, count: int, *, stream: bool, timeout: float, pids: dict[str, list[int]] | None = None
          ) -> dict:  # fmt: skip
    """`count` requests sent at once, one thread each; their figures (with `pids`, each process group's CPU per
    turn: the worker's, Daphne's, and this client's own, and the whole host's)."""
    pids = pids or {}
    with ThreadPoolExecutor(count) as pool:
        before = {name: cpu_seconds(members) for name, members in pids.items()}
        client_before, host_before = time.process_time(), host_busy_seconds()
        start = time.perf_counter()
        results = list(pool.map(lambda i: send_turn(base, key, QUERIES[i % len(QUERIES)], stream=stream,
                                                    timeout=timeout), range(count)))  # fmt: skip
        seconds = time.perf_counter() - start
        cpu = {name: cpu_seconds(members) - before[name] for name, members in pids.items()}
        cpu |= {"client": time.process_time() - client_before, "host": host_busy_seconds() - host_before}
    good = [r for r in results if "error" not in r]
    first = [r["first_status_ms"] / 1000 for r in good if r.get("first_status_ms") is not None]
    done = [r["turn_ms"] / 1000 for r in good]
    return {
        "requests": count,
        "completed": len(good),
        "errors": len(results) - len(good),
        "error_samples": sorted({r["error"][:160] for r in results if "error" in r})[:5],
        "seconds": round(seconds, 1),
        "turns_per_s": round(len(good) / seconds, 2),
        "cpu_ms_per_turn": {name: round(value * 1000 / len(good), 1) for name, value in cpu.items()} if good else {},
        "load_1m_after": round(os.getloadavg()[0], 2),
        "first_frame_s_p50_p95": [pct_s(first, 0.5), pct_s(first, 0.95)] if stream else None,
        "done_s_p50_p95": [pct_s(done, 0.5), pct_s(done, 0.95)],
    }


def pct_s(values: list[float], fraction: float) -> float | None:
    """The percentile of seconds, to a tenth."""
    from agents.console.metrics import percentile

    value = percentile(values, fraction)
    return None if value is None else round(value, 1)


def soak(base: str, key: str, seconds: float, rate: float, timeout: float) -> dict:
    """Streamed requests at a steady `rate` a second for `seconds` (each on its own thread, sent on schedule)."""
    count = int(seconds * rate)
    with ThreadPoolExecutor(max(8, int(rate * 30))) as pool:
        start = time.monotonic()
        futures = []
        for i in range(count):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            futures.append(pool.submit(send_turn, base, key, QUERIES[i % len(QUERIES)], stream=True, timeout=timeout))
        results = [f.result() for f in futures]
    good = [r for r in results if "error" not in r]
    return {
        "requests": count,
        "completed": len(good),
        "errors": count - len(good),
        "error_samples": sorted({r["error"][:160] for r in results if "error" in r})[:5],
        "done_s_p50_p95": [
            pct_s([r["turn_ms"] / 1000 for r in good], 0.5),
            pct_s([r["turn_ms"] / 1000 for r in good], 0.95),
        ],  # fmt: skip
    }


def admin(postgres: str, sql: str) -> None:
    with psycopg.connect(f"{postgres}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def max_connections(postgres: str) -> int:
    with psycopg.connect(f"{postgres}/postgres") as connection:
        return int(connection.execute("SHOW max_connections").fetchone()[0])


def run(args) -> dict:
    database = f"toolhub_load_{os.getpid()}"
    admin(args.postgres, f"CREATE DATABASE {database}")
    figures: dict = {"database": database, "postgres_max_connections": max_connections(args.postgres),
                     "concurrent": args.concurrent, "worker": f"prefork, concurrency {WORKER_CONCURRENCY}",
                     "cpus": os.cpu_count(), "load_1m_before": round(os.getloadavg()[0], 2)}  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(prefix="load-bench-") as data_dir:
            env = embedded_env(Path(data_dir))
            env.pop("DEBUG")  # debug off, as deployed (Django keeps every query of a request while debug is on)
            env |= {"DATABASE_URL": f"{args.postgres}/{database}", "REDIS_URL": args.redis_url,
                    "TOOLHUB_CHANNEL_PREFIX": f"toolhub-load-{os.getpid()}",
                    "TOOLHUB_CELERY_QUEUE": f"toolhub-load-{os.getpid()}",
                    "TOOLHUB_RATE_LIMIT_PER_MINUTE": "0", "TOOLHUB_USER_RATE_LIMIT_PER_MINUTE": "0"}  # fmt: skip
            setup_django(Path(data_dir))  # pct_s reads agents.console.metrics
            manage(env, "setup_demo")
            key = manage(env, "create_api_key", "load-bench").strip().splitlines()[-1]
            app = Celery("load_bench", broker=args.redis_url)
            try:
                with (
                    ConnectionCounter(args.postgres, database) as connections,
                    celery_worker(env, app, pool="prefork", concurrency=WORKER_CONCURRENCY),
                    daphne(env) as base,
                ):
                    for query in WARM_UP_QUERIES:
                        send_turn(base, key, query, stream=True, timeout=args.timeout)
                    connections.take()
                    daphne_pid = listening_pid(base)
                    pids = {"worker": worker_pids(app), "daphne": [daphne_pid] if daphne_pid else []}
                    figures["streaming"] = burst(base, key, args.concurrent, stream=True, timeout=args.timeout,
                                                 pids=pids)  # fmt: skip
                    figures["streaming"]["db_connections_least_most"] = connections.take()
                    figures["non_streaming"] = burst(base, key, args.concurrent, stream=False, timeout=args.timeout,
                                                     pids=pids)  # fmt: skip
                    figures["non_streaming"]["db_connections_least_most"] = connections.take()
                    figures["load_1m_after_bursts"] = round(os.getloadavg()[0], 2)
                    if args.soak_seconds > 0:
                        # The main processes (resources() adds their children: the worker's pool processes).
                        pids = {"daphne": daphne_pid, "worker": run_workers(app)[0][0]}
                        at_start = {name: resources(pid) for name, pid in pids.items()}
                        connections.take()
                        figures["soak"] = soak(base, key, args.soak_seconds, args.soak_rate, args.timeout)
                        figures["soak"] |= {
                            "seconds": args.soak_seconds,
                            "rate_per_s": args.soak_rate,
                            "db_connections_least_most": connections.take(),
                            "start": at_start,
                            "end": {name: resources(pid) for name, pid in pids.items()},
                        }
                        figures["load_1m_after_soak"] = round(os.getloadavg()[0], 2)
            finally:
                app.close()
    finally:
        admin(args.postgres, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return figures


def report(f: dict) -> None:
    print(f"toolhub load benchmark: scaled path (PostgreSQL max_connections {f['postgres_max_connections']}, Redis, "
          f"1 Celery worker {f['worker']}, 1 Daphne), builtin offline model, demo catalog")  # fmt: skip
    print(f"host: {f['cpus']} CPUs, 1-min load {f['load_1m_before']} before, {f['load_1m_after_bursts']} after the "
          f"bursts" + (f", {f['load_1m_after_soak']} after the soak" if "soak" in f else ""))  # fmt: skip
    for name in ("streaming", "non_streaming"):
        b = f[name]
        first = b["first_frame_s_p50_p95"]
        print(f"{b['requests']} concurrent {name.replace('_', '-')} requests: {b['completed']}/{b['requests']} "
              f"completed, {b['errors']} errors, in {b['seconds']} s: {b['turns_per_s']} turns/s, 1-min load "
              f"{b['load_1m_after']} after")  # fmt: skip
        print("  CPU ms a turn: " + ", ".join(f"{name} {ms}" for name, ms in b["cpu_ms_per_turn"].items()))
        if first:
            print(f"  first frame p50/p95: {first[0]} / {first[1]} s")
        print(f"  [DONE] (whole answer) p50/p95: {b['done_s_p50_p95'][0]} / {b['done_s_p50_p95'][1]} s")
        print(f"  PostgreSQL connections of the run (least/most): {b['db_connections_least_most']}")
        for sample in b["error_samples"]:
            print(f"  error: {sample}")
    if "soak" in f:
        s = f["soak"]
        print(
            f"soak: {s['rate_per_s']} streamed requests/s for {s['seconds']} s: {s['completed']}/{s['requests']} "
            f"completed, {s['errors']} errors; [DONE] p50/p95 {s['done_s_p50_p95'][0]} / {s['done_s_p50_p95'][1]} s"
        )
        print(f"  PostgreSQL connections (least/most): {s['db_connections_least_most']}")
        for name in ("daphne", "worker"):
            start, end = s["start"][name], s["end"][name]
            print(f"  {name}: open fds {start['fds']} -> {end['fds']}, RSS {start['rss_mb']} -> {end['rss_mb']} MB "
                  f"({end['rss_mb'] - start['rss_mb']:+.1f} MB)")  # fmt: skip
        for sample in s["error_samples"]:
            print(f"  error: {sample}")
    print(json.dumps(f))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrent", type=int, default=200, help="requests sent at once, per burst (200)")
    parser.add_argument("--soak-seconds", type=float, default=600, help="soak length; 0 skips it (600)")
    parser.add_argument("--soak-rate", type=float, default=2.0, help="soak requests per second (2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a request may take (600)")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server, no database")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    if not 0 < args.concurrent <= MAX_CONCURRENT or args.soak_seconds < 0 or args.soak_rate <= 0:
        parser.error(f"--concurrent must be 1..{MAX_CONCURRENT}, --soak-seconds 0 or more, --soak-rate above 0")
    report(run(args))


if __name__ == "__main__":
    main()
