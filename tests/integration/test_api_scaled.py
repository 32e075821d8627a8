"""The scaled path end to end: Daphne serves the API, a Celery worker runs the turn, Redis carries events."""

import openai
import pytest

from agents.access.api_keys import create_api_key
from agents.console.metrics import routing_metrics
from agents.models import RoutingLog, Turn
from demo.catalog import load_demo_catalog
from tests.support.builders import make_user
from tests.support.servers import celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_turn_runs_in_the_worker_and_streams_through_redis():
    load_demo_catalog()
    _, key = create_api_key(user=make_user(), name="scaled")
    env = database_env()
    with celery_worker(env, app), daphne(env) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
        stream = client.chat.completions.create(
            model="toolhub", stream=True, messages=[{"role": "user", "content": "What is 15 + 27?"}]
        )
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        whole = client.chat.completions.create(
            model="toolhub", messages=[{"role": "user", "content": "What is the capital of France?"}]
        )
    assert "42" in streamed
    assert whole.choices[0].message.content
    turns = list(Turn.objects.order_by("id"))
    assert [t.status for t in turns] == [Turn.Status.DONE, Turn.Status.DONE]
    assert RoutingLog.objects.filter(turn__in=turns).count() == 2
    metrics = routing_metrics()
    assert metrics["finished_turns"] == 2
    assert metrics["precision"] == 1.0 and metrics["recall"] == 1.0
    assert metrics["p50_analysis_ms"] is not None
