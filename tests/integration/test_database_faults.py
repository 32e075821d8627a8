"""PostgreSQL restarted under a running turn, on a PostgreSQL of the test's own (never the shared one).

The stream ends with a final frame and [DONE] within the turn's deadline, no request meets a dead pooled connection
afterwards (no 5xx but 503), and the next turn answers.
"""

import concurrent.futures
import time
import urllib.error
import urllib.request
from contextlib import ExitStack

import pytest
from celery import Celery

from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import celery_worker, daphne, database_env, manage, postgres_server, redis_server
from tests.support.streams import Stream, wait_until

pytestmark = pytest.mark.integration

LEASE = 4
TIME_LIMIT = 60
FAST = {"TOOLHUB_WARM_START": "0", "TOOLHUB_TURN_LEASE": str(LEASE), "TOOLHUB_MODEL_TIMEOUT": "20",
        "TOOLHUB_MODEL": "scripted", "TOOLHUB_TURN_TIME_LIMIT": str(TIME_LIMIT)}  # fmt: skip
SLACK = 15  # seconds past a deadline a loaded two-core host may need
CREATE_KEY = (
    "from tests.support.builders import make_user; from agents.access.api_keys import create_api_key; "
    "print(create_api_key(user=make_user(username='on-call'), name='db-faults')[1])"
)


def status_of(url: str, key: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_postgresql_restart_mid_turn_ends_the_stream_and_no_request_meets_a_dead_connection(mode):
    with postgres_server() as postgres, redis_server() as redis, ScriptedOpenAI() as model, ExitStack() as stack:
        model.behaviour, model.delay = "slow", 6
        model.steps = [{"content": "The answer."}] * 4
        env = database_env(DATABASE_URL=postgres.url, REDIS_URL=redis.url, TOOLHUB_MODEL_BASE_URL=model.base_url,
                           **FAST)  # fmt: skip
        manage(env, "migrate", "--no-input", "-v", "0")
        key = manage(env, "shell", "-c", CREATE_KEY).strip().splitlines()[-1]
        stack.enter_context(celery_worker(env, Celery("db-faults", broker=redis.url, backend=redis.url)))
        base = stack.enter_context(daphne(env))
        with concurrent.futures.ThreadPoolExecutor(12) as pool:  # Daphne's pool grows to hold a dozen connections
            assert set(pool.map(lambda _: status_of(f"{base}/v1/models", key), range(36))) == {200}
        stream = Stream(base, key)
        wait_until(lambda: model.requests, 120, "the worker asking the model")
        postgres.restart(mode)
        restarted = time.monotonic()
        stream.read_all()
        seconds = time.monotonic() - restarted
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            statuses = list(pool.map(lambda _: status_of(f"{base}/v1/models", key), range(36)))
        login = status_of(f"{base}/login/")
        model.behaviour = "ok"
        after = Stream(base, key, "hello again")
        after.read_all()

    print(f"PostgreSQL restart ({mode}) mid-turn: final frame {seconds:.1f} s after; then /v1/models {statuses}")
    assert stream.frames[-1] == "[DONE]" and seconds < TIME_LIMIT + 30 + SLACK
    assert stream.errors or stream.text == "The answer."
    assert all(status == 200 for status in statuses), statuses
    assert login == 200
    assert after.frames[-1] == "[DONE]" and not after.errors and after.text == "The answer."
