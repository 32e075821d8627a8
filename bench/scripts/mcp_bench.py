"""MCP benchmark: sync of a 1,000-tool MCP server, what toolhub adds to an MCP call, and how fast a 5 MB result
is cut; prints figures, not a test.

    .venv/bin/python bench/scripts/mcp_bench.py [--tools 1000] [--calls 200] [--big-bytes 5000000] [--busy N]

Runs on the embedded default (SQLite in a temporary data dir) against the
generated stdio server (tests/support/generated_mcp_server.py). Call latency is
measured three ways for the same tool of the same server: a direct SDK call
(ClientSession over stdio), toolhub's runtime path in-process
(agents.turns.tool_calls.execute: bundle and schema checks, then catalog.mcp_client.client),
the /mcp endpoint's logic in-process (agents.mcp_gateway.server.call: the bundle is
built for each call), and an SDK client calling it through toolhub's /mcp on a
real Daphne. The last two are compared in one run: the same tool served over streamable HTTP by its own
server (uvicorn) and through /mcp, called alternately in blocks of BLOCK calls (the order flipped each round), so
a host whose speed drifts slows both alike; each server's CPU a call is read from /proc. `--busy N` runs N busy
loops for that comparison (N = the cores: "both cores busy"). Then a 5 MB text result (the generated server's
gen_big): the time from its arrival to the cut, for the model (truncate_result) and for an MCP
client (truncate_blocks), and the whole call directly and through /mcp.

Daphne runs without its start-up warm-up (TOOLHUB_WARM_START=0): a server loads
its embedding models and builds its indexes on a thread for its first seconds,
which the measured calls (a tool called by name, no search) never need; on 2
cores that thread would be measured instead of the call path. The figures are a
warmed server's.
"""

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DATA_DIR = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
    os.environ.pop(name, None)
os.environ["TOOLHUB_DATA_DIR"] = str(DATA_DIR)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

import django  # noqa: E402

django.setup()
# The settings log each HTTP request of the client at INFO: thousands of lines between the figures.
logging.getLogger("httpx2").setLevel(logging.WARNING)

import httpx2  # noqa: E402
from django.core.management import call_command  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from agents.access.api_keys import create_api_key  # noqa: E402
from agents.mcp_gateway import server as mcp_server  # noqa: E402
from agents.providers import ToolCall  # noqa: E402
from agents.tools.results import truncate_blocks, truncate_result  # noqa: E402
from agents.turns.tool_calls import execute  # noqa: E402
from catalog.mcp_client import client as mcp_client  # noqa: E402
from catalog.mcp_client.sync import sync_server  # noqa: E402
from catalog.models import McpServer, Tool  # noqa: E402
from catalog.policies.bundle import build_bundle  # noqa: E402
from catalog.policies.decision import RoutingDecision, load_catalog  # noqa: E402
from tests.support.builders import make_policy, make_user  # noqa: E402
from tests.support.servers import daphne, embedded_env, free_port, start, wait_for_port  # noqa: E402

TOOL = "gen_tool_0001"
ARGUMENTS = {"q": "benchmark", "limit": 3}
WARM_UP = 20
BLOCK = 20


def percentile95(samples_ms: list[float]) -> float:
    ordered = sorted(samples_ms)
    return ordered[round(0.95 * (len(ordered) - 1))]


def percentiles(samples_ms: list[float]) -> str:
    return f"p50 {statistics.median(samples_ms):.2f} ms, p95 {percentile95(samples_ms):.2f} ms"


def server_args(tools: int) -> list[str]:
    return ["-m", "tests.support.generated_mcp_server", "--tools", str(tools)]


def bench_sync(tools: int) -> McpServer:
    server = McpServer.objects.create(name="generated", command=sys.executable, args=server_args(tools))
    mcp_client.connect(server)  # the process start and handshake are not the sync's work
    started = time.perf_counter()
    first = sync_server(server)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = sync_server(server)
    again_s = time.perf_counter() - started
    assert first.ok and len(first.new) == tools, first.summary()
    print(f"sync of a {tools:,}-tool MCP server (SQLite): first {first_s:.2f} s = {tools / first_s:,.0f} tools/s "
          f"({first.summary()})")  # fmt: skip
    print(f"  again, nothing changed: {again_s:.2f} s = {tools / again_s:,.0f} tools/s ({again.summary()})")
    return server


async def direct_calls(tools: int, calls: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=server_args(tools), cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await timed_calls(session, WARM_UP)
        return await timed_calls(session, calls)


def http_server(tools: int):
    """The generated server over streamable HTTP (uvicorn): (its URL, its process)."""
    port = free_port()
    process, log = start([sys.executable, *server_args(tools), "--http", f"127.0.0.1:{port}"], dict(os.environ))
    process.log = log
    wait_for_port(port, process, log)
    return f"http://127.0.0.1:{port}/mcp", process


def stop(process) -> None:
    process.terminate()
    process.wait(timeout=30)
    process.log.close()


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listening_pid(url: str) -> int:
    """The process listening on `url`'s port (Daphne runs as a child of its launcher)."""
    port = url.split(":")[2].split("/")[0]
    listing = subprocess.run(["ss", "-ltnp", f"( sport = :{port} )"], capture_output=True, text=True).stdout
    return int(re.search(r"pid=(\d+)", listing).group(1))


async def alternated_calls(direct_url: str, base: str, key: str, calls: int) -> dict[str, tuple[list[float], float]]:
    """The same calls directly and through /mcp, alternating in blocks: {"direct"|"mcp": (ms a call, CPU s a call)}."""
    urls = {"direct": (direct_url, {}), "mcp": (f"{base}/mcp", {"Authorization": f"Bearer {key}"})}
    pids = {name: listening_pid(url) for name, (url, _) in urls.items()}
    async with contextlib.AsyncExitStack() as stack:
        sessions = {}
        for name, (url, headers) in urls.items():
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60))
            read, write, *_ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
            sessions[name] = await stack.enter_async_context(ClientSession(read, write))
            await sessions[name].initialize()
        assert TOOL in [tool.name for tool in (await sessions["mcp"].list_tools()).tools]
        samples, cpu = {name: [] for name in sessions}, dict.fromkeys(sessions, 0.0)
        for session in sessions.values():
            await timed_calls(session, WARM_UP)
        for round_index in range((calls + BLOCK - 1) // BLOCK):
            order = list(sessions) if round_index % 2 == 0 else list(reversed(sessions))
            for name in order:
                started = cpu_seconds(pids[name])
                samples[name] += await timed_calls(sessions[name], min(BLOCK, calls - round_index * BLOCK))
                cpu[name] += cpu_seconds(pids[name]) - started
    return {name: (samples[name], cpu[name] / len(samples[name])) for name in sessions}


async def timed_calls(session: ClientSession, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await session.call_tool(TOOL, ARGUMENTS)
        samples.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.content[0].text
    return samples


@contextlib.contextmanager
def busy_loops(count: int):
    """`count` processes spinning on a core each while the block runs."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def runtime_calls(calls: int) -> list[float]:
    """What a turn's tool call costs: the bundle check, schema validation, the call through mcp_client."""
    bundle = build_bundle(RoutingDecision(), load_catalog())
    samples = []
    for index in range(WARM_UP + calls):
        started = time.perf_counter()
        outcome = execute(ToolCall(f"c{index}", TOOL, json.dumps(ARGUMENTS)), bundle, emit=lambda *a, **k: None,
                          max_result_tokens=1024)  # fmt: skip
        elapsed = (time.perf_counter() - started) * 1000
        assert not outcome.is_error, outcome.content
        if index >= WARM_UP:
            samples.append(elapsed)
    return samples


def mcp_server_calls(calls: int, key_id: int) -> list[float]:
    """toolhub's MCP-server logic in-process (agents.mcp_gateway.server.call): the bundle built per call, then
    execute."""
    samples = []
    for index in range(WARM_UP + calls):
        started = time.perf_counter()
        outcome = mcp_server.call(TOOL, ARGUMENTS, key_id)
        elapsed = (time.perf_counter() - started) * 1000
        assert not outcome.is_error, outcome.content
        if index >= WARM_UP:
            samples.append(elapsed)
    return samples


CONTENT_ARGS = ["-m", "tests.support.generated_mcp_server", "--tools", "0", "--content"]
BIG_ROUNDS = 5


def big_cuts(server: McpServer, size: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """(cut for the model, cut for /mcp, the raw call, the runtime's whole call) in ms, for a `size`-byte result."""
    model_cut, client_cut, raw, whole = [], [], [], []
    bundle = build_bundle(RoutingDecision(), load_catalog(), recommended=("gen_big",))
    for _ in range(BIG_ROUNDS):
        started = time.perf_counter()
        result = mcp_client.call_tool(server, "gen_big", {"bytes": size})  # arrived: parsed into blocks
        raw.append((time.perf_counter() - started) * 1000)
        assert len(result.blocks[0]["text"]) == size
        started = time.perf_counter()
        truncate_result(result.content, 1024)
        model_cut.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        truncate_blocks(list(result.blocks), 1024)
        client_cut.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        outcome = execute(ToolCall("big", "gen_big", json.dumps({"bytes": size})), bundle, emit=lambda *a, **k: None,
                          max_result_tokens=1024)  # fmt: skip
        whole.append((time.perf_counter() - started) * 1000)
        assert not outcome.is_error and len(outcome.content) < 10_000
    return model_cut, client_cut, raw, whole


async def big_direct(size: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=CONTENT_ARGS, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await timed_big(session, size)


async def timed_big(session: ClientSession, size: int) -> list[float]:
    samples = []
    for _ in range(BIG_ROUNDS):
        started = time.perf_counter()
        result = await session.call_tool("gen_big", {"bytes": size})
        samples.append((time.perf_counter() - started) * 1000)
        assert not result.is_error
    return samples


async def big_through(base: str, key: str, size: int) -> list[float]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await timed_big(session, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--big-bytes", type=int, default=5_000_000)
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="busy loops during the direct-or-/mcp calls")
    options = parser.parse_args()
    call_command("migrate", verbosity=0)
    print(f"data: {DATA_DIR}; CPUs: {os.cpu_count()}; load: {os.getloadavg()[0]:.2f}")
    bench_sync(options.tools)

    # One tool made callable without a search: an active read policy, always loaded.
    Tool.objects.filter(name=TOOL).update(always_load=True)
    make_policy(Tool.objects.get(name=TOOL))
    api_key, key = create_api_key(user=make_user(role="operator"), name="mcp-bench")
    content = McpServer.objects.create(name="content", command=sys.executable, args=CONTENT_ARGS)
    assert sync_server(content).ok
    make_policy(Tool.objects.get(name="gen_big"))  # read, low: callable by name over /mcp without a search

    direct = asyncio.run(direct_calls(options.tools, options.calls))
    runtime = runtime_calls(options.calls)
    logic = mcp_server_calls(options.calls, api_key.pk)
    model_cut, client_cut, big_raw, big_whole = big_cuts(content, options.big_bytes)
    big_alone = asyncio.run(big_direct(options.big_bytes))
    mcp_client.close_all()
    direct_url, direct_server = http_server(options.tools)
    # Limits still counted, but past any --calls a minute (the defaults, 600 and 1,200, stop 1,000 calls).
    unlimited = {"TOOLHUB_RATE_LIMIT_PER_MINUTE": "1000000", "TOOLHUB_USER_RATE_LIMIT_PER_MINUTE": "1000000"}
    try:
        with daphne(embedded_env(DATA_DIR) | {"TOOLHUB_WARM_START": "0"} | unlimited) as base:
            with busy_loops(options.busy):
                compared = asyncio.run(alternated_calls(direct_url, base, key, options.calls))
            big_via = asyncio.run(big_through(base, key, options.big_bytes))
    finally:
        stop(direct_server)
    (direct_http, direct_cpu), (through, mcp_cpu) = compared["direct"], compared["mcp"]
    print(
        f"{options.calls} calls of {TOOL} (after {WARM_UP} warm-up calls each; over HTTP: direct and /mcp "
        f"alternating in blocks of {BLOCK}{f', {options.busy} busy loops' if options.busy else ''}):"
    )
    print(f"  direct SDK call over stdio:                 {percentiles(direct)}")
    print(f"  direct SDK call over streamable HTTP:       {percentiles(direct_http)}")
    print(f"  toolhub runtime path (execute, in-process): {percentiles(runtime)}")
    print(f"  /mcp's logic in-process (mcp_server.call):  {percentiles(logic)}")
    print(f"  SDK client through toolhub's /mcp (Daphne): {percentiles(through)}")
    comparisons = (("runtime path", runtime, direct, "stdio"), ("/mcp logic", logic, direct, "stdio"),
                   ("/mcp", through, direct_http, "streamable HTTP"))  # fmt: skip
    for label, samples, base_samples, transport in comparisons:
        p50 = statistics.median(samples) - statistics.median(base_samples)
        p95 = percentile95(samples) - percentile95(base_samples)
        print(f"  added by toolhub ({label}, over a direct {transport} call): p50 {p50:+.2f} ms, p95 {p95:+.2f} ms")
    print(
        f"  /mcp p95 / direct streamable HTTP p95: {percentile95(through) / percentile95(direct_http):.2f} times; "
        f"server CPU a call: Daphne {mcp_cpu * 1000:.2f} ms, the direct server {direct_cpu * 1000:.2f} ms"
    )
    megabytes = options.big_bytes / 1_000_000
    print(f"a {megabytes:g} MB text result ({BIG_ROUNDS} rounds, medians):")
    print(f"  cut for the model, from its arrival (truncate_result): {statistics.median(model_cut):.1f} ms")
    print(f"  cut for an MCP client, from its arrival (truncate_blocks): {statistics.median(client_cut):.1f} ms")
    print(f"  toolhub's client call (stdio, parsed): {statistics.median(big_raw):.0f} ms; the runtime's whole call "
          f"(execute): {statistics.median(big_whole):.0f} ms")  # fmt: skip
    print(f"  direct SDK call over stdio: {statistics.median(big_alone):.0f} ms; SDK client through toolhub's /mcp: "
          f"{statistics.median(big_via):.0f} ms")  # fmt: skip
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
