"""The scaled task path: a real Celery worker takes tasks from Redis and returns results."""

import os

import pytest
from django.conf import settings

from tests.support.servers import celery_worker
from toolhub.celery import app

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def worker():
    with celery_worker(os.environ | {"DJANGO_SETTINGS_MODULE": "toolhub.settings"}, app) as process:
        yield process


def test_tasks_are_not_eager_on_the_scaled_path():
    assert settings.CELERY_TASK_ALWAYS_EAGER is False
    assert app.conf.broker_url.startswith("redis://")


def test_worker_runs_a_task_sent_through_the_redis_broker(worker):
    result = app.send_task("celery.accumulate", args=(3, 4))
    assert result.get(timeout=30) == [3, 4]
    assert result.state == "SUCCESS"
