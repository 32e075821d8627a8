"""The scaled task path: a real Celery worker takes tasks from Redis and returns results."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from toolhub.celery import app

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def celery_worker_process():
    env = os.environ | {"DJANGO_SETTINGS_MODULE": "toolhub.settings"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "toolhub", "worker", "--pool", "solo", "--loglevel", "WARNING",
         "--hostname", f"itest-{os.getpid()}@%h", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(timeout=1, destination=[f"itest-{os.getpid()}@{os.uname().nodename}"]):
            assert worker.poll() is None, f"worker exited: {worker.stdout.read()}"
            assert time.monotonic() < deadline, "worker did not answer a ping within 60 s"
        yield worker
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()


def test_tasks_are_not_eager_on_the_scaled_path():
    assert settings.CELERY_TASK_ALWAYS_EAGER is False
    assert app.conf.broker_url.startswith("redis://")


def test_worker_runs_a_task_sent_through_the_redis_broker(celery_worker_process):
    result = app.send_task("celery.accumulate", args=(3, 4))
    assert result.get(timeout=30) == [3, 4]
    assert result.state == "SUCCESS"
