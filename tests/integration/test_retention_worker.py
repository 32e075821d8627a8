"""The retention beat task on a real Celery worker over PostgreSQL and Redis: it reads the worker's setting."""

import datetime
import uuid

import pytest
from django.contrib.auth import get_user_model

from agents.models import Conversation, RetentionDay, RetentionRun, Turn, TurnEvent
from tests.support.builders import NOW, make_old_turns, make_turn
from tests.support.servers import celery_worker, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_beat_task_on_a_real_worker_removes_old_turns_once_and_keeps_recent_and_running_ones():
    conversation = Conversation.objects.create(owner=get_user_model().objects.create(username="retention"))
    make_old_turns(conversation, 1_200)
    running = make_turn(conversation, status=Turn.Status.RUNNING)
    recent = make_turn(conversation, when=NOW - datetime.timedelta(days=3))
    queue = f"retention-itest-{uuid.uuid4().hex[:12]}"
    env = database_env(TOOLHUB_WARM_START="0", TOOLHUB_CELERY_QUEUE=queue, TOOLHUB_RETENTION_DAYS="30",
                       TOOLHUB_RETENTION_BATCH="500")  # fmt: skip

    with celery_worker(env, app):
        first = app.send_task("agents.tasks.apply_retention", queue=queue).get(timeout=300)
        second = app.send_task("agents.tasks.apply_retention", queue=queue).get(timeout=300)

    assert (first["turns"], first["events"], first["messages"], first["routing_logs"]) == (1_200, 3_600, 2_400, 1_200)
    assert first["batches"] == 3 and first["retention_days"] == 30
    assert (second["turns"], second["events"]) == (0, 0)
    assert set(Turn.objects.values_list("pk", flat=True)) == {running.pk, recent.pk}
    assert TurnEvent.objects.count() == 6
    assert RetentionDay.objects.get().turns_done == 1_200
    assert list(RetentionRun.objects.values_list("turns", flat=True)) == [0, 1_200]
