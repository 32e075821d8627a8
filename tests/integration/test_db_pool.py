"""A live Daphne whose pool holds at most 2 PostgreSQL connections: open streams hold none, a request that gets none
in time is a 503 with Retry-After (on /v1 and on /mcp), and PostgreSQL never sees more than 2 connections of that
process.

Daphne's connections carry an application_name of this test's own, counted in pg_stat_activity on this test's
database. No Celery worker runs: the turns stay queued (on a queue of this test's own, emptied after), so the
streams stay open, sending keep-alive lines, for as long as the test needs them.
"""

import http.client
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import psycopg
import pytest
from django.db import connection

from agents.access.api_keys import create_api_key
from tests.support.builders import make_user
from tests.support.servers import daphne, database_env
from toolhub.celery import app as toolhub_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

POOL_MAX = 2
POOL_TIMEOUT = 1.0  # seconds a request waits for a pooled connection before its 503
STREAMS = 6
APPLICATION = f"toolhub-pool-test-{os.getpid()}"


def dsn(**query) -> str:
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


class PeakConnections:
    """Counts the Daphne process's connections in pg_stat_activity every 50 ms while the block runs."""

    def __init__(self):
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def count(self, cursor) -> int:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                       [connection.settings_dict["NAME"], APPLICATION])  # fmt: skip
        return cursor.fetchone()[0]

    def watch(self) -> None:
        with psycopg.connect(dsn(), autocommit=True) as watcher, watcher.cursor() as cursor:
            while not self.stop.wait(0.05):
                self.peak = max(self.peak, self.count(cursor))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=10)


class OpenStream:
    """A streamed chat completion read in a thread: the lines it sent (keep-alives, frames) with their times."""

    def __init__(self, base: str, key: str):
        url = urlsplit(base)
        self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        body = {"model": "toolhub", "stream": True, "messages": [{"role": "user", "content": "What is 15 + 27?"}]}
        self.connection.request("POST", "/v1/chat/completions", json.dumps(body),
                                {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})  # fmt: skip
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()
        self.keepalives: list[float] = []
        self.frames: list[str] = []
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        try:
            for raw in self.response:
                line = raw.decode().strip()
                if line.startswith(":"):
                    self.keepalives.append(time.monotonic())
                elif line.startswith("data: "):
                    self.frames.append(line)
        except (OSError, ValueError, http.client.HTTPException):
            pass  # closed by the test

    def kept_alive_after(self, moment: float) -> bool:
        return any(at > moment for at in self.keepalives)

    def close(self) -> None:
        self.connection.close()


def get(base: str, key: str, path: str) -> tuple[int, dict, dict]:
    url = urlsplit(base)
    client = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        client.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = client.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read() or b"{}")
    finally:
        client.close()


def initialize_mcp(base: str, key: str) -> tuple[int, dict, bytes]:
    """POST an MCP initialize to /mcp; its status, headers and body."""
    url = urlsplit(base)
    client = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pool-test", "version": "1"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    try:
        client.request("POST", "/mcp", body, {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream"})  # fmt: skip
        response = client.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        client.close()


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.1)


def test_streams_hold_no_connection_and_a_request_without_one_in_time_is_503_with_retry_after():
    key = create_api_key(user=make_user(username="pool"), name="pool")[1]
    queue = f"pool-test-{os.getpid()}"
    env = database_env(DATABASE_URL=dsn(application_name=APPLICATION), TOOLHUB_DB_POOL_MIN="1",
                       TOOLHUB_DB_POOL_MAX=str(POOL_MAX), TOOLHUB_DB_POOL_TIMEOUT=str(POOL_TIMEOUT),
                       TOOLHUB_CELERY_QUEUE=queue, TOOLHUB_WARM_START="0")  # fmt: skip
    streams: list[OpenStream] = []
    try:
        with daphne(env) as base, PeakConnections() as connections:
            streams = [OpenStream(base, key) for _ in range(STREAMS)]
            wait_until(lambda: all(len(s.keepalives) >= 1 for s in streams), 30, "a keep-alive on every stream")

            # Six open streams, two connections: the API still answers, every time.
            with ThreadPoolExecutor(4) as pool:
                listed = list(pool.map(lambda _: get(base, key, "/v1/models"), range(8)))
            assert [status for status, _, _ in listed] == [200] * 8

            # Hold the API keys' table locked: the two requests that get a connection wait on the lock with it;
            # the others get none within the pool's timeout and are answered 503 with Retry-After.
            with psycopg.connect(dsn()) as locker:
                locker.execute("LOCK TABLE agents_apikey IN ACCESS EXCLUSIVE MODE")
                with ThreadPoolExecutor(5) as pool:
                    pending = [pool.submit(get, base, key, "/v1/models") for _ in range(5)]
                    wait_until(lambda: sum(f.done() for f in pending) >= 3, 30, "three answers while locked")
                    mcp_busy = initialize_mcp(base, key)  # both connections still wait on the lock
                    locker.rollback()  # the lock goes: the two waiting requests go on
                    answers = [f.result() for f in pending]
            unlocked = time.monotonic()
            busy = [(headers, body) for status, headers, body in answers if status == 503]
            assert sorted(status for status, _, _ in answers) == [200, 200, 503, 503, 503]
            for headers, body in busy:
                assert headers["Retry-After"] == "2"
                assert body["error"]["code"] == "service_unavailable"

            status, headers, body = mcp_busy
            assert status == 503 and headers["retry-after"] == "2", (status, body)
            assert json.loads(body)["error"]["code"] == -32050  # agents.mcp_gateway.server.SERVER_BUSY
            assert initialize_mcp(base, key)[0] == 200

            # The streams lived through it (their reads found no connection for a while and tried again).
            wait_until(lambda: all(s.kept_alive_after(unlocked) for s in streams), 30, "keep-alives after the lock")
            assert all(not s.frames for s in streams)  # no error frame, no [DONE]: still waiting for their turns
            assert get(base, key, "/v1/models")[0] == 200
    finally:
        for stream in streams:
            stream.close()
        with toolhub_app.connection_for_write() as broker:
            broker.default_channel.queue_purge(queue)  # the six queued turns: nobody is to run them

    print(f"peak connections of the Daphne process: {connections.peak} (pool max {POOL_MAX}) with {STREAMS} streams")
    assert connections.peak == POOL_MAX
