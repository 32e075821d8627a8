"""The production layout (docs/operations/production.md) started from its shipped files, then broken on purpose.

deploy/Procfile's processes (two Daphne, two Celery workers, beat, HAProxy with deploy/haproxy.cfg), started at
once after the release step's collectstatic (the test database is migrated already), configured by
deploy/toolhub.env.example with this run's PostgreSQL and Redis, a Celery queue of the test's own, free ports and
a scripted model server in this process. Requests and console sockets go through the balancer, which names the
process that answered (X-Served-By); a test that needs a socket on a given process opens sockets until one lands
there (leastconn sends the next elsewhere). Console views are read as the browser shows them: the history the
socket sends first, then each live fragment.
"""

import asyncio
import html
import http.client
import json
import re
import threading
import time
from urllib.parse import urlsplit

import pytest
from django.test import Client
from honcho.environ import parse

from agents.access.api_keys import create_api_key
from agents.models import Turn, TurnEvent
from tests.support.builders import make_user, restore_migrated_routing_data
from tests.support.console_socket import ConsoleSocket, open_socket
from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import ROOT, Layout, database_env, free_port, manage, wait_for_port
from tests.support.streams import Stream, ended_once, no_event_twice, wait_until
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WEBS = ("web1", "web2")
WORKERS = ("worker1", "worker2")
LEASE = 4  # seconds: the watchdog (on beat every third of it, and from waiting streams) takes over a dead worker's turn
ANSWER = "Hello! I am well, thank you for asking."
READY_SECONDS = 120
ITEM = re.compile(r'<li id="event-(\d+)-(\d+)"')
LIVE_DELTA = re.compile(r'beforeend:#turn-(\d+)-content" data-sequence="(\d+)"[^>]*>(.*?)</div>', re.S)
HISTORY_CONTENT = re.compile(r'<div id="turn-(\d+)-content" class="content">(.*?)</div>', re.S)


class RunningLayout(Layout):
    """The layout's processes, and the test's ways to reach them: through the balancer, or a worker's ping."""

    def __init__(self, env: dict):
        super().__init__(env)
        self.url = f"http://{env['TOOLHUB_BALANCER_BIND']}"
        self.queue = env["TOOLHUB_CELERY_QUEUE"]
        self.loop = asyncio.new_event_loop()  # the console sockets' (tests/support/console_socket.py)
        threading.Thread(target=self.loop.run_forever, name="layout-sockets", daemon=True).start()

    def get(self, path: str, headers: dict | None = None) -> http.client.HTTPResponse:
        url = urlsplit(self.url)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        response.body = response.read()
        connection.close()
        return response

    def wait_for_web(self, name: str) -> None:
        """Until the balancer sends requests to `name` (its health checks passed)."""
        port = int(self.env[f"TOOLHUB_WEB{name[-1]}_PORT"])
        wait_for_port(port, self.process(name), self.processes[name][1], seconds=READY_SECONDS)
        wait_until(
            lambda: self.get("/healthz").getheader("X-Served-By") == name, READY_SECONDS, f"{name} behind the balancer"
        )

    def wait_for_worker(self, name: str) -> None:
        node = f"{name}.{self.queue}@"

        def answers() -> bool:
            self.alive(name)
            return any(next(iter(reply)).startswith(node) for reply in app.control.ping(timeout=1))

        wait_until(answers, READY_SECONDS, f"{name} answering a ping")

    def wait_for_all(self) -> None:
        port = int(self.env["TOOLHUB_BALANCER_BIND"].rsplit(":", 1)[1])
        wait_for_port(port, self.process("balancer"), self.processes["balancer"][1])
        for web in WEBS:
            self.wait_for_web(web)
        for worker in WORKERS:
            self.wait_for_worker(worker)
        self.alive("beat")

    def socket(self, path: str, session: str) -> ConsoleSocket:
        """A console socket through the balancer, once it has sent the history (its first message)."""
        probe = asyncio.run_coroutine_threadsafe(open_socket(self.url, path, session), self.loop).result(90)
        wait_until(lambda: probe.messages or probe.ended, 60, "the socket's history")
        assert probe.messages, probe.ended
        return probe

    def socket_on(self, web: str, path: str, session: str) -> ConsoleSocket:
        """A console socket through the balancer that landed on `web`; the ones that landed elsewhere are closed."""
        landed = []
        for _ in range(6):
            probe = self.socket(path, session)
            if probe.headers.get("x-served-by") == web:
                for other in landed:
                    self.close(other)
                return probe
            landed.append(probe)  # held open: the balancer sends the next socket to the process with fewer
        raise AssertionError(f"no socket landed on {web}: {[p.headers.get('x-served-by') for p in landed]}")

    def close(self, probe: ConsoleSocket) -> None:
        asyncio.run_coroutine_threadsafe(probe.close(), self.loop).result(30)


@pytest.fixture(scope="module")
def model():
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def started_layout(django_db_setup, model, tmp_path_factory):
    from django.conf import settings

    example = parse((ROOT / "deploy" / "toolhub.env.example").read_text())
    data_dir = tmp_path_factory.mktemp("layout")
    from_example = {
        name: value for name, value in example.items() if name not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")
    }
    env = database_env(
        **from_example
        | {
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "0",  # no TLS here: the balancer's plain HTTP is what the test speaks
            "TOOLHUB_DATA_DIR": str(data_dir),
            "TOOLHUB_CELERY_QUEUE": f"{settings.CELERY_TASK_DEFAULT_QUEUE}-layout",
            "TOOLHUB_BALANCER_BIND": f"127.0.0.1:{free_port()}",
            "TOOLHUB_WEB1_PORT": str(free_port()),
            "TOOLHUB_WEB2_PORT": str(free_port()),
            "TOOLHUB_WORKER_CONCURRENCY": "1",
            "TOOLHUB_DB_POOL_MAX": "4",
            "TOOLHUB_MODEL_BASE_URL": model.base_url,
            "TOOLHUB_MODEL": "scripted",
            "TOOLHUB_MODEL_TIMEOUT": "30",
            "TOOLHUB_TURN_LEASE": str(LEASE),
            "TOOLHUB_TURN_TIME_LIMIT": "120",
            "TOOLHUB_WARM_START": "0",  # the router loads on a worker's first turn; the web processes never need it
        }
    )
    running = RunningLayout(env)
    running.start("balancer", *WORKERS, "beat")
    try:
        manage(env, "collectstatic", "--noinput")  # the release step (the test database is migrated already)
        running.start(*WEBS)  # WhiteNoise reads STATIC_ROOT as the process starts
        running.wait_for_all()
        yield running
    finally:
        running.stop()
        running.loop.call_soon_threadsafe(running.loop.stop)


@pytest.fixture
def layout(started_layout):
    """The layout with every process running: what an earlier test killed is started again."""
    missing = [name for name in started_layout.commands if name not in started_layout.processes]
    if missing:
        started_layout.start(*missing)
        started_layout.wait_for_all()
    return started_layout


@pytest.fixture
def scripted(model):
    """The scripted model, reset: each test says what it does."""
    model.behaviour, model.steps = "ok", []
    model.released.clear()
    model.requests.clear()
    yield model
    model.released.set()  # a handler still held ends


@pytest.fixture
def api_key():
    restore_migrated_routing_data()
    return create_api_key(user=make_user(username="on-call", password=None), name="layout")[1]


@pytest.fixture
def session():
    """A logged-in operator's session id: the console sockets' cookie."""
    client = Client()
    client.force_login(make_user(username="watcher", password=None))
    return client.cookies["sessionid"].value


def other(web: str) -> str:
    return next(name for name in WEBS if name != web)


class ConsoleView:
    """What a console socket showed for one turn: the history it sent on connect, then the live fragments."""

    def __init__(self, probe: ConsoleSocket, turn_id: int):
        texts = [text for _received, text in probe.messages]
        history, live = texts[0], texts[1:]
        self.history_items = [int(seq) for turn, seq in ITEM.findall(history) if int(turn) == turn_id]
        self.history_content = next(
            (html.unescape(text) for turn, text in HISTORY_CONTENT.findall(history) if int(turn) == turn_id), ""
        )
        self.live_items = [int(seq) for text in live for turn, seq in ITEM.findall(text) if int(turn) == turn_id]
        self.live_deltas = [(int(seq), html.unescape(text)) for fragment in live
                            for turn, seq, text in LIVE_DELTA.findall(fragment) if int(turn) == turn_id]  # fmt: skip

    @property
    def items(self) -> list[int]:
        return self.history_items + self.live_items

    @property
    def content(self) -> str:
        return self.history_content + "".join(text for _seq, text in self.live_deltas)


def stored_items(turn: Turn) -> list[int]:
    """The sequences of the turn's events that show as a line of its timeline (every one but content and budget)."""
    events = TurnEvent.objects.filter(turn=turn).exclude(type=TurnEvent.Type.DELTA).exclude(phase="budget")
    return list(events.order_by("sequence").values_list("sequence", flat=True))


def shows_the_end(probe: ConsoleSocket, turn: Turn) -> bool:
    done = TurnEvent.objects.get(turn=turn, type=TurnEvent.Type.DONE).sequence
    return done in ConsoleView(probe, turn.id).items


def assert_whole_and_in_order(probe: ConsoleSocket, turn: Turn) -> ConsoleView:
    """Every event of the turn once, in sequence order, and the answer's text once: history then live."""
    view = ConsoleView(probe, turn.id)
    assert view.items == stored_items(turn), (view.history_items, view.live_items)
    sequences = [seq for seq, _text in view.live_deltas]
    assert sequences == sorted(set(sequences)), sequences
    assert view.content == ANSWER
    return view


def test_static_files_come_from_collectstatic_through_the_balancer(layout):
    page = layout.get("/login/")
    stylesheet = re.search(rb'href="(/static/[^"]+\.css)"', page.body).group(1).decode()
    static = layout.get(stylesheet, {"Accept-Encoding": "gzip"})

    assert page.status == 200 and page.getheader("X-Served-By") in WEBS
    assert re.search(r"\.[0-9a-f]{12}\.css$", stylesheet)  # the manifest's hashed name
    assert static.status == 200
    assert static.getheader("Content-Encoding") == "gzip"  # compressed once, at collectstatic
    assert "immutable" in static.getheader("Cache-Control")


def test_an_mcp_session_stays_with_the_process_that_opened_it_on_every_new_connection(layout, api_key):
    """The SDK keeps a session in the process that opened it: a request of that session on any new connection (a
    client's pool closed the last one, or a GET stream beside a POST) must reach that process, not the other (404)."""
    url = urlsplit(layout.url)

    def post(message: dict, session: str | None = None) -> http.client.HTTPResponse:
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
        if session:
            headers["Mcp-Session-Id"] = session
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)  # a new connection each time
        connection.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = connection.getresponse()
        response.body = response.read()
        connection.close()
        return response

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "layout", "version": "1"}}
    opened = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
    session, home = opened.getheader("Mcp-Session-Id"), opened.getheader("X-Served-By")
    assert opened.status == 200 and session and home in WEBS
    assert post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session).status == 202

    listed = [post({"jsonrpc": "2.0", "id": n, "method": "tools/list"}, session) for n in range(1, 7)]

    assert [(r.status, r.getheader("X-Served-By")) for r in listed] == [(200, home)] * 6
    answers = [json.loads(re.search(rb"^data: (.+)$", r.body, re.M).group(1)) for r in listed]
    assert [(a["id"], "tools" in a["result"]) for a in answers] == [(n, True) for n in range(1, 7)]


def test_a_console_on_one_process_follows_a_turn_started_through_the_other_live_and_in_order(
    layout, scripted, api_key, session
):
    scripted.behaviour, scripted.steps = "stall", [{"content": ANSWER}]  # held after its first piece
    stream = Stream(layout.url, api_key)
    wait_until(lambda: TurnEvent.objects.filter(type=TurnEvent.Type.DELTA).exists(), 120, "the answer's first piece")
    turn = Turn.objects.get()
    console = layout.socket_on(other(stream.served_by), f"/ws/console/{turn.conversation_id}/", session)
    scripted.released.set()
    stream.read_all()
    wait_until(lambda: shows_the_end(console, turn), 60, "the console showing the turn's end")
    layout.close(console)

    assert stream.served_by in WEBS and not stream.errors and stream.text == ANSWER
    ended_once(turn)
    view = assert_whole_and_in_order(console, turn)
    assert view.history_content == "Hello! "  # what was stored before the socket opened
    assert len(view.live_deltas) >= 2 and view.live_items  # the rest arrived live, through the other process


def test_a_web_process_killed_mid_turn_loses_no_event_for_its_sockets_and_no_stream(layout, scripted, api_key, session):
    scripted.behaviour, scripted.steps = "stall", [{"content": ANSWER}, {"content": ANSWER}]
    stream = Stream(layout.url, api_key)
    survivor, victim = stream.served_by, other(stream.served_by)
    wait_until(lambda: TurnEvent.objects.filter(type=TurnEvent.Type.DELTA).exists(), 120, "the answer's first piece")
    turn = Turn.objects.get()
    path = f"/ws/console/{turn.conversation_id}/"
    doomed = layout.socket_on(victim, path, session)
    steady = layout.socket_on(survivor, path, session)

    layout.kill(victim)
    killed = time.monotonic()
    wait_until(lambda: doomed.ended, 30, "the killed process's socket dropping")
    reconnected = layout.socket(path, session)  # as the htmx ws extension does, through the balancer
    replayed_in = time.monotonic() - killed
    scripted.released.set()
    stream.read_all()
    for probe in (steady, reconnected):
        wait_until(lambda probe=probe: shows_the_end(probe, turn), 60, "the console showing the turn's end")
    after = Stream(layout.url, api_key, "and once more")  # the balancer routes around the dead process
    after.read_all()
    for probe in (steady, reconnected):
        layout.close(probe)

    assert reconnected.headers["x-served-by"] == survivor
    assert not stream.errors and stream.text == ANSWER  # the SSE stream through the balancer completed
    ended_once(turn)
    no_event_twice(turn)
    assert_whole_and_in_order(steady, turn)
    replayed = assert_whole_and_in_order(reconnected, turn)  # the stored history replayed, then live
    assert replayed.history_content.startswith("Hello! ") and replayed.live_items
    dropped = ConsoleView(doomed, turn.id)
    assert dropped.items == stored_items(turn)[: len(dropped.items)]  # what it showed before: a prefix, in order
    assert after.served_by == survivor and not after.errors and after.text == ANSWER

    layout.start(victim)  # a deploy restarts it: the balancer sends it connections again
    restarted = time.monotonic()
    layout.wait_for_web(victim)
    print(f"{victim} killed: its socket reconnected and had the history {replayed_in:.1f} s after the kill; "
          f"restarted, it served through the balancer {time.monotonic() - restarted:.1f} s later")  # fmt: skip


def test_a_worker_killed_mid_turn_leaves_the_other_to_finish_every_turn_once(layout, scripted, api_key):
    # No answer until released; one step each for the two held requests (the dead worker's too), the restart and
    # the turn after.
    scripted.behaviour, scripted.steps = "hang", [{"content": ANSWER}] * 4
    streams = [Stream(layout.url, api_key, f"question {n}") for n in range(2)]
    # One turn in each worker: one pool child each, and a child holds one unacknowledged turn at a time.
    wait_until(lambda: len(scripted.requests) == 2, 120, "both workers asking the model")
    layout.kill("worker1")
    killed = time.monotonic()
    scripted.behaviour = "ok"
    scripted.released.set()
    for stream in streams:
        stream.read_all()
    print(
        f"worker1 killed: both held turns answered {time.monotonic() - killed:.1f} s after the kill (lease {LEASE} s)"
    )
    after = Stream(layout.url, api_key, "one more question")
    after.read_all()
    layout.alive("worker2")

    for stream in [*streams, after]:
        assert not stream.errors and stream.text == ANSWER
    turns = list(Turn.objects.order_by("id"))
    # The dead worker's turn showed nothing yet: the watchdog (on beat, or called by the turn's waiting stream)
    # queued it again once, and worker2 ran it.
    assert sorted(turn.attempt for turn in turns) == [1, 1, 2]
    for turn in turns:
        ended_once(turn)
        assert turn.status == Turn.Status.DONE
        no_event_twice(turn)
