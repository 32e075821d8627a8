"""Faults on the scaled path, with real processes: the model hanging or dead, the worker killed, Redis restarted.

Each test streams a turn through Daphne and a Celery worker and proves it ends, answered or visibly failed, with a
final frame and [DONE] within its deadline plus a few seconds, and that the turn's stored events end with one
`done`. Short leases and deadlines here; the bounds asserted are the settings' own plus slack for a loaded host.
"""

import signal
import time
from contextlib import ExitStack

import openai
import pytest
from celery import Celery

from agents.access.api_keys import create_api_key
from agents.models import ModelProfile, Turn, TurnEvent
from tests.support.builders import make_user, restore_migrated_routing_data
from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import celery_worker, daphne, database_env, free_port, output_of, redis_server
from tests.support.streams import QUESTION, Stream, ended_once, no_event_twice, wait_until
from toolhub.celery import app as toolhub_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MODEL_TIMEOUT = 6
LEASE = 4
FAST = {"TOOLHUB_WARM_START": "0", "TOOLHUB_TURN_LEASE": str(LEASE), "TOOLHUB_MODEL_TIMEOUT": str(MODEL_TIMEOUT),
        "TOOLHUB_MODEL_RETRIES": "2", "TOOLHUB_MODEL": "scripted", "TOOLHUB_TURN_TIME_LIMIT": "120"}  # fmt: skip
SLACK = 15  # seconds past a deadline a loaded two-core host may need to say so (a worker, Daphne, the test)


@pytest.fixture
def api_key():
    restore_migrated_routing_data()
    return create_api_key(user=make_user(username="on-call"), name="faults")[1]


# --- model hanging or dead ---------------------------------------------------------------------------------


def test_a_hanging_model_ends_in_an_error_within_its_one_deadline_and_a_dead_one_at_once(api_key):
    with ScriptedOpenAI() as model, ExitStack() as stack:
        model.behaviour = "hang"
        # A second model the client may name: nothing listens on its port (connection refused).
        ModelProfile.objects.create(
            name="dead",
            base_url=f"http://127.0.0.1:{free_port()}/v1",
            upstream_model="x",
            context_window=8192,
            max_output_tokens=1024,
            reserved_result_tokens=1024,
        )
        env = database_env(TOOLHUB_MODEL_BASE_URL=model.base_url, **FAST)
        stack.enter_context(celery_worker(env, toolhub_app))
        base = stack.enter_context(daphne(env))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=api_key, max_retries=0, timeout=120)

        started = time.monotonic()
        raw = Stream(base, api_key)
        raw.read_all()
        streamed_in = time.monotonic() - started

        started = time.monotonic()
        with pytest.raises(openai.APIError) as sdk_stream:  # the SDK skips keep-alives, raises the error frame
            for _chunk in client.chat.completions.create(model="toolhub", stream=True,
                                                         messages=[{"role": "user", "content": QUESTION}]):  # fmt: skip
                pass
        sdk_streamed_in = time.monotonic() - started

        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as whole:
            client.chat.completions.create(model="toolhub", messages=[{"role": "user", "content": QUESTION}])
        whole_in = time.monotonic() - started

        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as dead:
            client.chat.completions.create(model="dead", messages=[{"role": "user", "content": QUESTION}])
        dead_in = time.monotonic() - started
        model.released.set()

    print(f"hanging model, deadline {MODEL_TIMEOUT} s: raw stream {streamed_in:.1f} s, SDK stream "
          f"{sdk_streamed_in:.1f} s, non-streaming {whole_in:.1f} s; dead model {dead_in:.1f} s")  # fmt: skip
    assert raw.frames[-1] == "[DONE]" and raw.frames[-2] == {"error": raw.errors[0]}
    assert raw.errors[0]["code"] == "model_timeout"
    assert raw.keepalives >= 1  # the wait was not silent
    assert sdk_stream.value.code == "model_timeout"
    assert (whole.value.status_code, whole.value.code) == (504, "model_timeout")
    assert (dead.value.status_code, dead.value.code) == (502, "model_unavailable")
    # One deadline for all three attempts: never three deadlines back to back.
    for seconds in (streamed_in, sdk_streamed_in, whole_in):
        assert seconds < MODEL_TIMEOUT + SLACK
    assert dead_in < SLACK
    turns = list(Turn.objects.order_by("id"))
    assert len(turns) == 4
    for turn in turns:
        ended_once(turn)
        assert turn.status == Turn.Status.FAILED


# --- worker killed mid-turn --------------------------------------------------------------------------------


def killed_mid_turn(api_key, behaviour: str, answer: str):
    """Stream a turn; SIGKILL its worker while the model is held; start another worker; read the stream's end.
    Returns (stream, seconds from the kill to the final frame, the turn)."""
    with ScriptedOpenAI() as model, ExitStack() as stack:
        model.behaviour = behaviour
        model.steps = [{"content": answer}] * 2
        env = database_env(TOOLHUB_MODEL_BASE_URL=model.base_url, **FAST)
        first = stack.enter_context(celery_worker(env, toolhub_app))
        base = stack.enter_context(daphne(env))
        stream = Stream(base, api_key)
        wait_until(lambda: model.requests, 180, "the worker asking the model")
        if behaviour == "stall":
            wait_until(lambda: TurnEvent.objects.filter(type=TurnEvent.Type.DELTA).exists(), 30, "a first delta")
        first.send_signal(signal.SIGKILL)  # no clean shutdown, no acknowledgement
        first.wait(timeout=30)
        killed = time.monotonic()
        model.behaviour = "ok"
        model.released.set()  # the dead worker's request ends; the next one answers at once
        stack.enter_context(celery_worker(env, toolhub_app))
        stream.read_all()
        return stream, time.monotonic() - killed, Turn.objects.get()


def test_a_worker_killed_before_the_answer_began_is_restarted_and_answers_once(api_key):
    stream, seconds, turn = killed_mid_turn(api_key, "hang", "Hello! I am well.")
    print(f"worker killed while the model thought: final frame {seconds:.1f} s after the kill (lease {LEASE} s)")
    assert stream.frames[-1] == "[DONE]" and not stream.errors
    assert stream.text == "Hello! I am well."  # once
    ended_once(turn)
    no_event_twice(turn)  # the restart stored none of the dead run's status or routing events again
    assert (turn.status, turn.attempt) == (Turn.Status.DONE, 2)
    phases = [f.get("phase") for f in stream.frames if isinstance(f, dict) and f.get("type") == "status"]
    assert len(phases) == len(set(phases)), phases  # no status frame twice
    assert seconds < LEASE + SLACK


def test_a_worker_killed_after_the_answer_began_fails_the_turn_visibly(api_key):
    stream, seconds, turn = killed_mid_turn(api_key, "stall", "Hello! I am well, thank you.")
    print(f"worker killed mid-answer: error frame {seconds:.1f} s after the kill (lease {LEASE} s)")
    assert stream.frames[-1] == "[DONE]"
    assert [error["code"] for error in stream.errors] == ["worker_lost"]
    assert stream.text == "Hello! "  # what the dead run showed, never repeated
    ended_once(turn)
    assert (turn.status, turn.attempt) == (Turn.Status.FAILED, 1)
    assert seconds < LEASE + SLACK


# --- Redis restarted mid-turn ------------------------------------------------------------------------------


def test_a_redis_restart_mid_turn_leaves_the_worker_serving_and_the_turn_ends_with_a_final_frame(api_key):
    with ScriptedOpenAI() as model, redis_server() as redis, ExitStack() as stack:
        model.behaviour, model.delay = "slow", 5
        model.steps = [{"content": "The answer."}] * 4
        env = database_env(REDIS_URL=redis.url, TOOLHUB_MODEL_BASE_URL=model.base_url, **FAST)
        broker = Celery("faults", broker=redis.url, backend=redis.url)
        # The pool the issue saw die: prefork with a free child, so the consumer waits in BRPOP holding the
        # unacknowledged turn when Redis goes away.
        worker = stack.enter_context(celery_worker(env, broker, pool="prefork", concurrency=2))
        base = stack.enter_context(daphne(env))
        stream = Stream(base, api_key)
        wait_until(lambda: model.requests, 180, "the worker asking the model")
        redis.restart()
        restarted = time.monotonic()
        stream.read_all()
        seconds = time.monotonic() - restarted
        log = output_of(worker.log)
        assert worker.poll() is None, f"the worker died with the Redis restart: {log}"
        model.behaviour = "ok"
        after = Stream(base, api_key, "hello again")
        after.read_all()

    print(f"Redis restarted mid-turn: final frame {seconds:.1f} s after the restart; worker alive")
    assert "'NoneType' object has no attribute 'hostname'" not in log
    assert stream.frames[-1] == "[DONE]"
    first, second = Turn.objects.order_by("id")
    ended_once(first)
    if first.status == Turn.Status.FAILED:
        assert stream.errors, "a failed turn's stream ends with its error frame"
    else:
        assert stream.text == "The answer." and not stream.errors
    assert after.frames[-1] == "[DONE]" and not after.errors and after.text == "The answer."
    ended_once(second)
    assert second.status == Turn.Status.DONE


# --- Redis down when a request arrives ---------------------------------------------------------------------


def test_redis_down_at_submit_ends_the_stream_and_answers_503_then_the_next_request_succeeds(api_key):
    with ScriptedOpenAI() as model, redis_server() as redis, ExitStack() as stack:
        model.steps = [{"content": "The answer."}] * 2
        env = database_env(REDIS_URL=redis.url, TOOLHUB_MODEL_BASE_URL=model.base_url, TOOLHUB_BROKER_WAIT="3", **FAST)
        broker = Celery("faults", broker=redis.url, backend=redis.url)
        stack.enter_context(celery_worker(env, broker))
        base = stack.enter_context(daphne(env))
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=api_key, max_retries=0, timeout=60)
        redis.stop()
        started = time.monotonic()
        stream = Stream(base, api_key)
        stream.read_all()
        stream_seconds = time.monotonic() - started
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="toolhub", messages=[{"role": "user", "content": QUESTION}])
        redis.start()
        after = Stream(base, api_key, "hello again")
        after.read_all()

    print(f"Redis down at submit: the stream ended {stream_seconds:.1f} s after the request")
    assert stream.frames[-1] == "[DONE]" and stream_seconds < 10
    assert [error["code"] for error in stream.errors] == ["broker_unavailable"]
    assert refused.value.status_code == 503 and refused.value.response.headers["Retry-After"] == "5"
    assert refused.value.body["code"] == "broker_unavailable"
    assert after.frames[-1] == "[DONE]" and not after.errors and after.text == "The answer."
    first, second, third = Turn.objects.order_by("id")
    assert [ended_once(turn)[-2] for turn in (first, second)] == [TurnEvent.Type.ERROR] * 2
    ended_once(third)
    assert third.status == Turn.Status.DONE


def test_a_queued_task_lost_with_a_redis_restart_is_sent_again_and_the_turn_answers(api_key):
    with ScriptedOpenAI() as model, redis_server() as redis, ExitStack() as stack:
        model.steps = [{"content": "The answer."}]
        env = database_env(REDIS_URL=redis.url, TOOLHUB_MODEL_BASE_URL=model.base_url, **FAST)
        base = stack.enter_context(daphne(env))
        stream = Stream(base, api_key)  # no worker yet: the task waits in Redis
        wait_until(lambda: Turn.objects.filter(published_at__isnull=False).exists(), 30, "the task sent")
        redis.restart()  # no persistence: the queued task is gone
        stack.enter_context(celery_worker(env, Celery("faults", broker=redis.url, backend=redis.url)))
        started = time.monotonic()
        stream.read_all()
        seconds = time.monotonic() - started

    print(f"a task lost in a Redis restart: answered {seconds:.1f} s after the worker started")
    assert stream.frames[-1] == "[DONE]" and not stream.errors and stream.text == "The answer."
    (turn,) = Turn.objects.all()
    ended_once(turn)
    assert turn.status == Turn.Status.DONE and seconds < LEASE + SLACK + 30
