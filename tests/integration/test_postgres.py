"""The scaled path's database: PostgreSQL enforces the constraints the design relies on."""

import datetime

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents.models import Conversation, TurnEvent, Workflow
from tests.support.builders import make_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def make_workflow(owner, conversation, key):
    return Workflow.objects.create(
        conversation=conversation,
        owner=owner,
        kind="rule_creation",
        phase="rule_draft",
        expires_at=timezone.now() + datetime.timedelta(hours=1),
        idempotency_key=key,
    )


def test_tests_run_on_postgresql():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("select current_setting('server_version_num')::int")
        assert cursor.fetchone()[0] >= 130000


def test_idempotency_key_is_unique_per_owner_in_the_database():
    owner, other = make_user("a"), make_user("b")
    conversation = Conversation.objects.create(owner=owner)
    make_workflow(owner, conversation, "key-1")
    make_workflow(owner, conversation, "")
    make_workflow(owner, conversation, "")  # no key: no uniqueness
    make_workflow(other, Conversation.objects.create(owner=other), "key-1")  # another owner
    with pytest.raises(IntegrityError), transaction.atomic():
        make_workflow(owner, conversation, "key-1")
    assert Workflow.objects.filter(owner=owner, idempotency_key="key-1").count() == 1


def test_turn_event_sequence_is_unique_per_turn():
    conversation = Conversation.objects.create(owner=make_user())
    turn = conversation.turns.create()
    TurnEvent.objects.create(turn=turn, sequence=1, type=TurnEvent.Type.STATUS)
    with pytest.raises(IntegrityError), transaction.atomic():
        TurnEvent.objects.create(turn=turn, sequence=1, type=TurnEvent.Type.DONE)
