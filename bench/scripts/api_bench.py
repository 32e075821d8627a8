"""API benchmark: streamed turn latency, per-turn overhead, one worker's throughput; prints figures, not a test."""

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from celery import Celery  # noqa: E402

from tests.support.servers import EMBEDDED_UNSET, celery_worker, daphne, embedded_env, manage  # noqa: E402

DATA_SET = "the seed's query mix, cycled in this order"
QUERIES = (
    "What is 15 + 27?",
    "What time is it in Paris?",
    "What is the capital of France?",
    "Calculate 50% of 200",
    "list the active campaigns",
    "Tạo chiến dịch mới cho Tết",
)
# The first turn warms the process; the second reaches tool search, which loads the embedding model.
WARM_UP_QUERIES = ("What is 15 + 27?", "list the active campaigns")
WARM_UP = len(WARM_UP_QUERIES)
# tests.support.servers pipes the servers' output without reading it (~230 bytes a turn): stay well under 64 KiB.
MAX_REQUESTS = 200
POSTGRES = "postgresql://postgres@127.0.0.1:5432"
# The API turns these product messages into answer text; seen in an answer, the turn failed.
FAILURE_TEXTS = ("The turn failed", "The turn did not finish in time.")


def setup_django(data_dir: Path) -> None:
    """This process reads the embedded run's database with the environment Daphne had."""
    for name in (*EMBEDDED_UNSET, "DJANGO_SETTINGS_MODULE"):
        os.environ.pop(name, None)
    os.environ |= {"DJANGO_SETTINGS_MODULE": "toolhub.settings", "TOOLHUB_DATA_DIR": str(data_dir)}
    import django

    django.setup()


def pct(values: list[float], fraction: float) -> int | None:
    from agents.console.metrics import percentile

    value = percentile(values, fraction)
    return None if value is None else round(value)


def since_ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def send_turn(base: str, key: str, query: str, *, stream: bool, timeout: float) -> dict:
    """One chat completion over a fresh loopback connection, timed client-side."""
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    body = json.dumps({"model": "toolhub", "stream": stream, "messages": [{"role": "user", "content": query}]})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    result = {"query": query, "first_status_ms": None, "content": ""}
    start = time.perf_counter()
    try:
        connection.request("POST", "/v1/chat/completions", body=body.encode(), headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            return result | {"error": f"HTTP {response.status}: {response.read()[:200].decode(errors='replace')}"}
        if not stream:
            answer = json.loads(response.read())
            return result | {"turn_ms": since_ms(start), "content": answer["choices"][0]["message"]["content"]}
        for raw in response:  # the stream line by line, as it arrives
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                result["turn_ms"] = since_ms(start)
                break
            frame = json.loads(line.removeprefix("data: "))
            if frame.get("type") == "status" and result["first_status_ms"] is None:
                result["first_status_ms"] = since_ms(start)
            result["content"] += "".join(c["delta"].get("content") or "" for c in frame.get("choices", []))
        else:
            return result | {"error": "the stream ended without data: [DONE]"}
    except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
        return result | {"error": f"{type(exc).__name__}: {exc} after {since_ms(start):.0f} ms"}
    finally:
        connection.close()
    if stream and result["first_status_ms"] is None:
        return result | {"error": "no status frame before [DONE]"}
    if any(text in result["content"] for text in FAILURE_TEXTS):
        return result | {"error": f"failed turn: {result['content'][:200]}"}
    return result


def start_servers_env(env: dict) -> str:
    manage(env, "setup_demo")
    return manage(env, "create_api_key", "bench").strip().splitlines()[-1]


def run_embedded(env: dict, requests: int, timeout: float) -> tuple[list, list]:
    key = start_servers_env(env)
    with daphne(env) as base:
        warm = [send_turn(base, key, query, stream=True, timeout=timeout) for query in WARM_UP_QUERIES]
        timed = [send_turn(base, key, QUERIES[i % len(QUERIES)], stream=True, timeout=timeout) for i in range(requests)]
    return warm, timed


def embedded_overhead() -> list[tuple]:
    """(status, steward_ms, turn_ms) of every turn after the warm-up, in request order."""
    from agents.models import Turn

    rows = Turn.objects.order_by("id").values_list("status", "routing_log__steward_ms", "routing_log__turn_ms")
    return list(rows)[WARM_UP:]


def admin(sql: str) -> None:
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def run_scaled(env: dict, requests: int, clients: int, timeout: float, redis_url: str) -> dict:
    database = f"toolhub_bench_{os.getpid()}"
    admin(f"CREATE DATABASE {database}")
    try:
        env = env | {"DATABASE_URL": f"{POSTGRES}/{database}", "REDIS_URL": redis_url,
                     "TOOLHUB_CHANNEL_PREFIX": f"toolhub-bench-{os.getpid()}"}  # fmt: skip
        key = start_servers_env(env)
        app = Celery("api_bench", broker=redis_url)
        try:
            with celery_worker(env, app), daphne(env) as base:
                workers = sorted(next(iter(reply)) for reply in app.control.ping(timeout=1))
                warm = [send_turn(base, key, query, stream=False, timeout=timeout) for query in WARM_UP_QUERIES]
                with ThreadPoolExecutor(clients) as pool:
                    start = time.perf_counter()
                    timed = list(pool.map(lambda i: send_turn(base, key, QUERIES[i % len(QUERIES)], stream=False,
                                                              timeout=timeout), range(requests)))  # fmt: skip
                    seconds = time.perf_counter() - start
        finally:
            app.close()
        with psycopg.connect(f"{POSTGRES}/{database}") as connection:
            rows = connection.execute(
                "SELECT t.status, r.turn_ms FROM agents_turn t LEFT JOIN agents_routinglog r ON r.turn_id = t.id "
                "ORDER BY t.id"
            ).fetchall()
    finally:
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return {"warm": warm, "timed": timed, "seconds": seconds, "rows": rows, "workers": workers}


def ok(results: list) -> list:
    return [r for r in results if "error" not in r]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=40, help="timed streamed turns, embedded (default 40)")
    parser.add_argument("--scaled-requests", type=int, default=40, help="timed turns, scaled path (default 40)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent client threads, scaled path")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a request may take")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    if not (0 < args.requests <= MAX_REQUESTS and 0 < args.scaled_requests <= MAX_REQUESTS and args.clients > 0):
        parser.error(f"--requests and --scaled-requests must be 1..{MAX_REQUESTS}, --clients at least 1")

    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        embedded_dir, scaled_dir = Path(tmp, "embedded"), Path(tmp, "scaled")
        embedded_dir.mkdir()
        scaled_dir.mkdir()
        env = embedded_env(embedded_dir)
        setup_django(embedded_dir)
        load_before = os.getloadavg()[0]
        warm, timed = run_embedded(env, args.requests, args.timeout)
        server = embedded_overhead()
        scaled = run_scaled(embedded_env(scaled_dir), args.scaled_requests, args.clients, args.timeout, args.redis_url)
        load_after = os.getloadavg()[0]

    good = ok(timed)
    first = [r["first_status_ms"] for r in good]
    turn = [r["turn_ms"] for r in good]
    finished = [(steward, ms) for _status, steward, ms in server if ms is not None]
    steward_ms = [s for s, _ in finished if s is not None]
    turn_ms = [ms for _, ms in finished]
    aligned = len(server) == len(timed) and len(good) == len(timed) == len(finished)
    outside = [r["turn_ms"] - ms for r, (_, ms) in zip(timed, finished, strict=True)] if aligned else []
    by_query = {q: [r["turn_ms"] for r in good if r["query"] == q] for q in QUERIES}
    scaled_good = ok(scaled["timed"])
    scaled_turn = [r["turn_ms"] for r in scaled_good]
    scaled_server = [ms for _status, ms in scaled["rows"][WARM_UP:] if ms is not None]
    figures = {
        "data_set": DATA_SET,
        "queries": list(QUERIES),
        "requests": args.requests,
        "warm_up_queries": list(WARM_UP_QUERIES),
        "embedded_warm_up_turn_ms": [round(r["turn_ms"]) if "turn_ms" in r else None for r in warm],
        "embedded_first_status_ms_p50": pct(first, 0.5),
        "embedded_first_status_ms_p95": pct(first, 0.95),
        "embedded_turn_ms_p50": pct(turn, 0.5),
        "embedded_turn_ms_p95": pct(turn, 0.95),
        "embedded_turn_ms_p50_p95_by_query": {q: [pct(ms, 0.5), pct(ms, 0.95)] for q, ms in by_query.items()},
        "embedded_errors": len(timed) - len(good),
        "embedded_turns_by_status": dict(Counter(status for status, *_ in server)),
        "overhead_turn_ms_p50": pct(turn_ms, 0.5),
        "overhead_turn_ms_p95": pct(turn_ms, 0.95),
        "steward_ms_p50": pct(steward_ms, 0.5),
        "steward_ms_p95": pct(steward_ms, 0.95),
        "overhead_share_of_turn": round(sum(turn_ms) / sum(turn), 3) if turn and aligned else None,
        "steward_share_of_turn": round(sum(steward_ms) / sum(turn), 3) if turn and aligned else None,
        "outside_turn_ms_p50": pct(outside, 0.5),
        "outside_turn_ms_p95": pct(outside, 0.95),
        "scaled_requests": args.scaled_requests,
        "scaled_clients": args.clients,
        "scaled_workers_answering_ping": scaled["workers"],
        "scaled_warm_up_turn_ms": [round(r["turn_ms"]) if "turn_ms" in r else None for r in scaled["warm"]],
        "scaled_turns_per_s": round(len(scaled_good) / scaled["seconds"], 2),
        "scaled_latency_ms_p50": pct(scaled_turn, 0.5),
        "scaled_latency_ms_p95": pct(scaled_turn, 0.95),
        "scaled_server_turn_ms_p50": pct(scaled_server, 0.5),
        "scaled_server_turn_ms_p95": pct(scaled_server, 0.95),
        "scaled_errors": len(scaled["timed"]) - len(scaled_good),
        "scaled_turns_by_status": dict(Counter(status for status, _ in scaled["rows"])),
        "load_1m_before": round(load_before, 2),
        "load_1m_after": round(load_after, 2),
        "cpus": os.cpu_count(),
    }
    report(figures, [r for r in timed + scaled["timed"] if "error" in r])


def report(f: dict, errors: list) -> None:
    def row(label: str, p50, p95, note: str = "") -> None:
        print(f"  {label:<48}{p50 if p50 is not None else '-':>8}{p95 if p95 is not None else '-':>8}  {note}")

    def warm_up(times: list) -> str:
        return ", ".join(f"{query!r} {ms} ms" for query, ms in zip(f["warm_up_queries"], times, strict=True))

    share = "{:.1%}".format
    print(f"toolhub API benchmark over loopback; data set: {f['data_set']}:")
    print("  " + " | ".join(f["queries"]))
    print(f"host: {f['cpus']} CPUs, 1-min load {f['load_1m_before']} before, {f['load_1m_after']} after\n")
    print(f"Embedded default (SQLite, eager Celery, builtin model): {f['requests']} sequential streamed turns")
    print(f"  warm-up (model load): {warm_up(f['embedded_warm_up_turn_ms'])}")
    print(f"  {'ms':<48}{'p50':>8}{'p95':>8}")
    row("first SSE status frame (client)", f["embedded_first_status_ms_p50"], f["embedded_first_status_ms_p95"])
    row("full streamed turn to [DONE] (client)", f["embedded_turn_ms_p50"], f["embedded_turn_ms_p95"])
    overhead, steward = f["overhead_share_of_turn"], f["steward_share_of_turn"]
    row("overhead incl. tools (RoutingLog.turn_ms)", f["overhead_turn_ms_p50"], f["overhead_turn_ms_p95"],
        f"{share(overhead)} of client turn time" if overhead is not None else "")  # fmt: skip
    row("steward (RoutingLog.steward_ms)", f["steward_ms_p50"], f["steward_ms_p95"],
        f"{share(steward)} of client turn time" if steward is not None else "")  # fmt: skip
    row("outside turn_ms (API, relay, HTTP)", f["outside_turn_ms_p50"], f["outside_turn_ms_p95"])
    for query, (p50, p95) in f["embedded_turn_ms_p50_p95_by_query"].items():
        row(f"  streamed turn: {query}", p50, p95)
    print(f"  errors: {f['embedded_errors']}; turns by status: {f['embedded_turns_by_status']}\n")
    print(f"Scaled path (PostgreSQL, Redis, 1 Celery worker --pool solo, Daphne): {f['scaled_requests']} "
          f"non-streaming turns from {f['scaled_clients']} client threads")  # fmt: skip
    workers = len(f["scaled_workers_answering_ping"])
    print(f"  workers answering a ping on the broker: {workers}" + (" (they share the queue!)" * (workers > 1)))
    print(f"  warm-up (model load): {warm_up(f['scaled_warm_up_turn_ms'])}")
    print(f"  throughput: {f['scaled_turns_per_s']} turns/s through one worker")
    print(f"  {'ms':<48}{'p50':>8}{'p95':>8}")
    row("request latency (client)", f["scaled_latency_ms_p50"], f["scaled_latency_ms_p95"])
    row("turn in the worker (RoutingLog.turn_ms)", f["scaled_server_turn_ms_p50"], f["scaled_server_turn_ms_p95"])
    print(f"  errors: {f['scaled_errors']}; turns by status: {f['scaled_turns_by_status']}")
    for error in errors:
        print(f"  error: {error['query']!r}: {error['error']}")
    print(json.dumps(f, ensure_ascii=False))


if __name__ == "__main__":
    main()
