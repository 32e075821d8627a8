"""Faults on the scaled path, with real processes: the worker killed, Redis restarted, the model hanging or dead.

Each test streams a turn through Daphne (a raw SSE reader, so every frame is
seen) and proves the turn ends, finished or visibly failed, with a final
frame and [DONE], and that the turn's stored events end with one `done`.
"""

import http.client
import json
import signal
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

import pytest
from celery import Celery

from agents.api_keys import create_api_key
from agents.models import Turn, TurnEvent
from catalog.demo_catalog import load_demo_catalog
from tests.builders import make_user, restore_migrated_routing_data
from tests.scripted_openai import ScriptedOpenAI
from tests.servers import celery_worker, daphne, database_env, free_port, redis_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Short intervals so a fault is noticed in seconds (production: 5 s heartbeat, 30 s stall, 10 s watchdog).
FAST_LIVENESS = {
    "TOOLHUB_WARM_START": "0",
    "TOOLHUB_TURN_HEARTBEAT": "1",
    "TOOLHUB_TURN_STALL": "4",
    "TOOLHUB_TURN_WATCHDOG_INTERVAL": "1",
    "TOOLHUB_STREAM_KEEPALIVE": "2",
    "TOOLHUB_TURN_TIME_LIMIT": "90",
}
READ_TIMEOUT = 120  # the reader's own limit: far above every deadline here, so hitting it means a hang


class Stream:
    """POST a streamed chat completion and read its SSE frames as they come (JSON frames, then "[DONE]")."""

    def __init__(self, base: str, key: str, text: str):
        url = urlsplit(base)
        self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=READ_TIMEOUT)
        body = {"model": "toolhub", "stream": True, "messages": [{"role": "user", "content": text}]}
        self.connection.request("POST", "/v1/chat/completions", json.dumps(body),
                                {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})  # fmt: skip
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()
        self.frames: list = []

    def next_frame(self):
        while True:
            line = self.response.readline()
            if not line:
                return None  # the server closed the stream
            line = line.decode().strip()
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                frame = data if data == "[DONE]" else json.loads(data)
                self.frames.append(frame)
                return frame

    def read_until(self, predicate) -> None:
        while (frame := self.next_frame()) is not None and not predicate(frame):
            pass

    def read_all(self) -> list:
        self.read_until(lambda frame: frame == "[DONE]")
        self.connection.close()
        return self.frames

    @property
    def text(self) -> str:
        return "".join(
            choice["delta"].get("content") or ""
            for frame in self.frames
            if isinstance(frame, dict)
            for choice in frame.get("choices", [])
        )


def errors(frames) -> list[dict]:
    return [frame["error"] for frame in frames if isinstance(frame, dict) and "error" in frame]


def phases(frames) -> list[str]:
    return [frame.get("phase") for frame in frames if isinstance(frame, dict) and frame.get("type") == "status"]


def assert_ended_once(turn: Turn) -> None:
    """Finished or failed, and its stored events end with exactly one `done`."""
    turn.refresh_from_db()
    assert turn.status in (Turn.Status.DONE, Turn.Status.FAILED)
    types = list(TurnEvent.objects.filter(turn=turn).order_by("sequence").values_list("type", flat=True))
    assert types[-1] == TurnEvent.Type.DONE and types.count(TurnEvent.Type.DONE) == 1, types


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.2)


@pytest.fixture
def api_key():
    restore_migrated_routing_data()
    load_demo_catalog()
    return create_api_key(user=make_user(username="fault-ops"), name="faults")[1]


def broker_app(url: str) -> Celery:
    """A client of the test's own broker (to ping workers that use it)."""
    return Celery("faults", broker=url, backend=url)


def test_a_worker_killed_mid_turn_is_taken_over_and_the_stream_ends_with_the_answer_once(api_key):
    with ScriptedOpenAI() as model, redis_server() as redis, ExitStack() as stack:
        model.behaviour, model.delay = "slow", 600  # the first worker waits for a model that never answers
        env = database_env(REDIS_URL=redis.url, TOOLHUB_MODEL_BASE_URL=model.base_url, TOOLHUB_MODEL="scripted",
                           TOOLHUB_MODEL_RETRIES="0", TOOLHUB_MODEL_TIMEOUT="80", **FAST_LIVENESS)  # fmt: skip
        app = broker_app(redis.url)
        first = stack.enter_context(celery_worker(env, app))
        base = stack.enter_context(daphne(env))
        stream = Stream(base, api_key, "hello there, how are you")
        wait_until(lambda: model.requests, 180, "the worker asking the model")  # a cold child loads the router
        first.send_signal(signal.SIGKILL)  # no clean shutdown, no acknowledgement
        first.wait(timeout=30)
        model.behaviour = "ok"
        model.steps = [{"content": "Hello! I am well."}]
        stack.enter_context(celery_worker(env, app, beat=True))  # a new worker, and the schedule with the watchdog
        frames = stream.read_all()

    turn = Turn.objects.get()
    assert frames[-1] == "[DONE]" and not errors(frames)
    assert stream.text == "Hello! I am well."  # once: nothing the dead run showed is shown again
    assert "taken_over" in phases(frames)
    assert_ended_once(turn)
    assert (turn.status, turn.attempt) == (Turn.Status.DONE, 2)


def test_a_redis_restart_mid_turn_leaves_the_worker_alive_and_the_turn_ends_visibly(api_key):
    with ScriptedOpenAI() as model, redis_server() as redis, ExitStack() as stack:
        model.behaviour, model.delay = "slow", 6
        model.steps = [{"content": "The answer."}] * 5  # the same whichever request (or run of the turn) asks
        env = database_env(REDIS_URL=redis.url, TOOLHUB_MODEL_BASE_URL=model.base_url, TOOLHUB_MODEL="scripted",
                           TOOLHUB_MODEL_RETRIES="0", **FAST_LIVENESS)  # fmt: skip
        app = broker_app(redis.url)
        # The pool the issue saw die: prefork, two children, with the beat schedule (the watchdog) in the worker.
        worker = stack.enter_context(celery_worker(env, app, pool="prefork", concurrency=2, beat=True))
        base = stack.enter_context(daphne(env))
        stream = Stream(base, api_key, "hello there, how are you")
        wait_until(lambda: model.requests, 180, "the worker asking the model")  # a cold child loads the router
        redis.restart()
        model.behaviour = "ok"
        frames = stream.read_all()
        assert worker.poll() is None, "the worker died with the Redis restart"
        # It still takes work after the restart.
        after = Stream(base, api_key, "hello again")
        after_frames = after.read_all()

    assert frames[-1] == "[DONE]"
    turns = list(Turn.objects.order_by("id"))
    assert_ended_once(turns[0])
    if turns[0].status == Turn.Status.FAILED:
        assert errors(frames), "a failed turn's stream ends with its error frame"
    else:
        assert stream.text == "The answer."  # once, whichever run of the turn answered
    assert after_frames[-1] == "[DONE]" and not errors(after_frames) and after.text == "The answer."
    assert_ended_once(turns[1])
    assert turns[1].status == Turn.Status.DONE


@pytest.mark.parametrize("fault", ["hangs before answering", "trickles forever", "refuses connections"])
def test_a_model_that_hangs_or_is_dead_gives_an_error_frame_and_done_within_the_deadline(api_key, fault):
    with ScriptedOpenAI() as model, ExitStack() as stack:
        model.behaviour, model.delay = {"hangs before answering": ("slow", 600), "trickles forever": ("trickle", 1),
                                        "refuses connections": ("ok", 0)}[fault]  # fmt: skip
        base_url = f"http://127.0.0.1:{free_port()}/v1" if fault == "refuses connections" else model.base_url
        env = database_env(TOOLHUB_MODEL_BASE_URL=base_url, TOOLHUB_MODEL="scripted", TOOLHUB_MODEL_TIMEOUT="8",
                           TOOLHUB_MODEL_RETRIES="2", **FAST_LIVENESS)  # fmt: skip
        from toolhub.celery import app

        stack.enter_context(celery_worker(env, app))
        base = stack.enter_context(daphne(env))
        frames = Stream(base, api_key, "hello there, how are you").read_all()
        model.behaviour = "ok"  # let a trickling handler end

    (error,) = errors(frames)
    assert frames[-1] == "[DONE]" and frames[-2] == {"error": error}
    assert error["code"] == "model_unavailable"
    if fault == "refuses connections":
        assert "failed: APIConnectionError" in error["message"]
    else:
        assert "did not answer within" in error["message"]
        assert "keepalive" in phases(frames)  # the wait was not silent
    assert_ended_once(Turn.objects.get())
