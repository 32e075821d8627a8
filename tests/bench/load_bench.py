"""Load and soak on the scaled path: 200 concurrent streamed, then 200 concurrent plain requests, then a steady soak.

One Daphne process and one Celery worker (prefork, concurrency 2, with beat)
on a PostgreSQL database of its own and Redis; the builtin model. Prints time
to first frame and to [DONE] (p50/p95), errors, PostgreSQL connections at
peak, and for the soak the connections, open files and RSS of every server
process at its start and end. Prints figures, asserts nothing.
"""

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402, I001
from celery import Celery  # noqa: E402

from tests.bench.api_bench import POSTGRES, QUERIES, WARM_UP_QUERIES, admin, send_turn  # noqa: E402
from tests.servers import celery_worker, daphne, embedded_env, manage  # noqa: E402


def pct(values: list[float], fraction: float) -> int | None:
    """Nearest-rank percentile (no Django in this process)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, int(fraction * len(ordered) + 0.5) - 1))])


def connections(database: str) -> int:
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as connection:
        return connection.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()[0]


class PeakConnections:
    """Samples the database's connection count twice a second while a phase runs."""

    def __init__(self, database: str):
        self.database, self.peak, self._stop = database, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self):
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, connections(self.database))


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def process_of_port(port: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"daphne" in b" ".join(command) and str(port).encode() in command:
                return int(entry.name)
    raise RuntimeError(f"no daphne on port {port}")


def usage(pids: dict[str, int]) -> dict:
    """Open files and RSS (MiB) per process."""
    figures = {}
    for name, pid in pids.items():
        status = Path(f"/proc/{pid}/status").read_text()
        rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        figures[name] = {"open_files": len(os.listdir(f"/proc/{pid}/fd")), "rss_mib": round(rss / 1024, 1)}
    return figures


def burst(base: str, key: str, count: int, *, stream: bool, timeout: float) -> tuple[list, float]:
    barrier = threading.Barrier(count)

    def one(i):
        barrier.wait()
        return send_turn(base, key, QUERIES[i % len(QUERIES)], stream=stream, timeout=timeout)

    start = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(one, range(count)))
    return results, time.perf_counter() - start


def soak(base: str, key: str, seconds: float, rate: float, timeout: float) -> list:
    """Streamed turns started at a steady `rate` per second for `seconds`, each in its own thread."""
    results, threads = [], []
    start = time.monotonic()
    i = 0
    while (now := time.monotonic()) - start < seconds:
        due = start + i / rate
        if now < due:
            time.sleep(due - now)
            continue
        query = QUERIES[i % len(QUERIES)]
        thread = threading.Thread(target=lambda q=query: results.append(send_turn(base, key, q, stream=True,
                                                                                    timeout=timeout)))  # fmt: skip
        thread.start()
        threads.append(thread)
        i += 1
    for thread in threads:
        thread.join()
    return results


def summary(results: list, seconds: float) -> dict:
    good = [r for r in results if "error" not in r]
    first = [r["first_status_ms"] for r in good if r.get("first_status_ms") is not None]
    done = [r["turn_ms"] for r in good]
    return {
        "requests": len(results),
        "errors": len(results) - len(good),
        "first_frame_ms_p50_p95": [pct(first, 0.5), pct(first, 0.95)] if first else None,
        "done_ms_p50_p95": [pct(done, 0.5), pct(done, 0.95)],
        "seconds": round(seconds, 1),
        "error_samples": sorted({r["error"][:160] for r in results if "error" in r})[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--soak-seconds", type=float, default=600)
    parser.add_argument("--soak-rate", type=float, default=2.0, help="streamed turns started per second")
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--pool-max", default="20", help="TOOLHUB_DB_POOL_MAX of each process")
    args = parser.parse_args()

    database = f"toolhub_load_{os.getpid()}"
    admin(f"CREATE DATABASE {database}")
    figures = {"cpus": os.cpu_count(), "load_1m_before": round(os.getloadavg()[0], 2), "pool_max": args.pool_max}
    try:
        with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp:
            env = embedded_env(Path(tmp)) | {
                "DATABASE_URL": f"{POSTGRES}/{database}",
                "REDIS_URL": args.redis_url,
                "TOOLHUB_CHANNEL_PREFIX": f"toolhub-load-{os.getpid()}",
                "TOOLHUB_CELERY_QUEUE": f"load-{os.getpid()}",
                "TOOLHUB_DB_POOL_MAX": args.pool_max,
                "TOOLHUB_LEARN_FROM_TURNS": "0",  # the soak repeats six requests: learning would only merge them
            }
            manage(env, "setup_demo")
            key = manage(env, "create_api_key", "load").strip().splitlines()[-1]
            app = Celery("load_bench", broker=args.redis_url)
            with celery_worker(env, app, pool="prefork", concurrency=2, beat=True) as worker, daphne(env) as base:
                pids = {"daphne": process_of_port(int(base.rsplit(":", 1)[1])), "worker": worker.pid}
                for n, child in enumerate(children(worker.pid)):
                    pids[f"worker_child_{n}"] = child
                for query in WARM_UP_QUERIES * 2:  # each prefork child loads the router once
                    send_turn(base, key, query, stream=False, timeout=args.timeout)
                for stream in (True, False):
                    with PeakConnections(database) as peak:
                        results, seconds = burst(base, key, args.concurrent, stream=stream, timeout=args.timeout)
                    figures["streamed" if stream else "plain"] = summary(results, seconds) | {
                        "peak_db_connections": peak.peak
                    }
                if args.soak_seconds > 0:
                    figures["soak_start"] = {"db_connections": connections(database), **usage(pids)}
                    start = time.perf_counter()
                    with PeakConnections(database) as peak:
                        results = soak(base, key, args.soak_seconds, args.soak_rate, args.timeout)
                    figures["soak"] = summary(results, time.perf_counter() - start) | {
                        "rate_per_s": args.soak_rate,
                        "peak_db_connections": peak.peak,
                    }
                    time.sleep(5)  # let the last turns' connections go back
                    figures["soak_end"] = {"db_connections": connections(database), **usage(pids)}
            app.close()
            with psycopg.connect(f"{POSTGRES}/{database}") as connection:
                figures["turns_by_status"] = dict(
                    Counter(s for (s,) in connection.execute("SELECT status FROM agents_turn").fetchall())
                )
    finally:
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    figures["load_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
