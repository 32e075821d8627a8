"""Retention: what goes, what stays, what the summaries keep, and that reruns change nothing."""

import datetime
import json
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings

from agents.console.metrics import tokens_saved_total, turns_total
from agents.models import Conversation, Message, RetentionDay, RetentionRun, RoutingLog, Turn, TurnEvent, Workflow
from agents.turns.retention import apply_retention, expired_loose_messages, expired_turns
from tests.support.builders import NOW, OLD, at_once, make_old_turns, make_turn, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation():
    return Conversation.objects.create(owner=make_user())


def test_old_finished_turns_go_with_their_events_messages_and_routing_logs(conversation):
    old = [make_turn(conversation), make_turn(conversation, status=Turn.Status.FAILED)]
    recent = make_turn(conversation, when=NOW - datetime.timedelta(days=2))

    result = apply_retention(days=30)

    assert (result.turns, result.events, result.messages, result.routing_logs) == (2, 6, 4, 2)
    assert not Turn.objects.filter(pk__in=[turn.pk for turn in old]).exists()
    assert list(Turn.objects.values_list("pk", flat=True)) == [recent.pk]
    assert TurnEvent.objects.filter(turn=recent).count() == 3
    assert Message.objects.count() == 2 and RoutingLog.objects.count() == 1


def old_conversation() -> Conversation:
    conversation = Conversation.objects.create(owner=make_user(f"user-{Conversation.objects.count()}"))
    Conversation.objects.filter(pk=conversation.pk).update(created_at=OLD, updated_at=OLD)
    return conversation


def test_a_conversation_its_expired_turns_and_messages_leave_empty_goes_with_them():
    emptied_by_turns, emptied_by_a_message = old_conversation(), old_conversation()
    make_turn(emptied_by_turns)
    make_turn(emptied_by_turns, status=Turn.Status.CANCELLED)
    Message.objects.filter(pk=Message.objects.create(conversation=emptied_by_a_message, role="user").pk).update(
        created_at=OLD
    )
    still_talking = old_conversation()  # old, but a turn of last week keeps it
    make_turn(still_talking)
    make_turn(still_talking, when=NOW - datetime.timedelta(days=7))
    with_a_workflow = old_conversation()  # a submitted workflow keeps its idempotency key and result
    make_turn(with_a_workflow)
    Workflow.objects.create(conversation=with_a_workflow, owner=with_a_workflow.owner, kind="k", phase="p",
                            status=Workflow.Status.SUBMITTED, expires_at=OLD, idempotency_key="once")  # fmt: skip
    never_used_recently = Conversation.objects.create(owner=make_user("recent"))  # updated now: a turn may come
    make_turn(never_used_recently)
    kept = {still_talking.pk, with_a_workflow.pk, never_used_recently.pk}

    assert apply_retention(days=30, dry_run=True).conversations == 2
    result = apply_retention(days=30, batch_size=1)

    assert (result.turns, result.conversations) == (5, 2)
    assert set(Conversation.objects.values_list("pk", flat=True)) == kept
    assert RetentionRun.objects.get().conversations == 2
    assert apply_retention(days=30).conversations == 0


def test_a_running_waiting_or_queued_turn_is_never_touched_however_old(conversation):
    kept = [make_turn(conversation, status=status) for status in (Turn.Status.RUNNING, Turn.Status.WAITING,
                                                                  Turn.Status.QUEUED)]  # fmt: skip
    apply_retention(days=30)
    assert set(Turn.objects.values_list("pk", flat=True)) == {turn.pk for turn in kept}
    assert TurnEvent.objects.count() == 9 and Message.objects.count() == 6 and RoutingLog.objects.count() == 3
    assert not RetentionDay.objects.exists()


def test_an_open_workflows_conversation_keeps_every_row(conversation):
    make_turn(conversation)
    Workflow.objects.create(conversation=conversation, owner=conversation.owner, kind="k", phase="p",
                            expires_at=NOW + datetime.timedelta(hours=1))  # fmt: skip
    assert apply_retention(days=30).turns == 0
    assert Turn.objects.count() == 1 and TurnEvent.objects.count() == 3


def test_the_day_summary_keeps_counts_latencies_and_the_overview_totals(conversation):
    for turn_ms in (80, 120, 400, 900):
        make_turn(conversation, turn_ms=turn_ms, saved=50)
    make_turn(conversation, status=Turn.Status.FAILED, turn_ms=7000, saved=50)
    make_turn(conversation, status=Turn.Status.CANCELLED, turn_ms=300, saved=50)
    totals_before = (turns_total(), tokens_saved_total())

    apply_retention(days=30, batch_size=2)

    summary = RetentionDay.objects.get()
    assert summary.day == OLD.date()
    assert (summary.turns_done, summary.turns_failed, summary.turns_cancelled) == (4, 1, 1)
    assert (summary.events, summary.messages) == (18, 12)
    assert (summary.routing_logs, summary.fallbacks, summary.tokens_saved) == (6, 1, 300)
    # Buckets ..100, ..250, ..500, ..1000, ..10000: the median turn is in ..500, the p95 in ..10000.
    assert (summary.p50_turn_ms, summary.p95_turn_ms) == (500, 10000)
    assert (summary.p50_steward_ms, summary.p95_steward_ms) == (50, 50)
    assert (turns_total(), tokens_saved_total()) == totals_before == (6, 300)


def test_batches_each_add_to_the_summary_and_the_run_is_recorded(conversation):
    for _ in range(5):
        make_turn(conversation)
    result = apply_retention(days=30, batch_size=2)
    assert result.batches == 3 and result.turns == 5
    assert RetentionDay.objects.get().turns_done == 5
    run = RetentionRun.objects.get()
    removed = (run.turns, run.events, run.messages, run.routing_logs)
    assert (run.retention_days, run.batches, removed) == (30, 3, (5, 15, 10, 5))


def test_a_second_run_removes_nothing_and_counts_nothing_twice(conversation):
    make_turn(conversation)
    apply_retention(days=30)
    again = apply_retention(days=30)
    assert (again.turns, again.events, again.messages, again.routing_logs) == (0, 0, 0, 0)
    assert RetentionDay.objects.get().turns_done == 1
    assert RetentionRun.objects.count() == 2


def test_a_later_run_adds_to_a_day_already_summarised(conversation):
    make_turn(conversation, turn_ms=100)
    apply_retention(days=30)
    make_turn(conversation, turn_ms=100)  # e.g. a turn of that day that finished late
    apply_retention(days=30)
    summary = RetentionDay.objects.get()
    assert summary.turns_done == 2 and summary.events == 6 and sum(summary.turn_ms_buckets) == 2


def test_loose_messages_and_routing_logs_older_than_the_setting_go_too(conversation):
    message = Message.objects.create(conversation=conversation, role="user", content="earlier")
    Message.objects.filter(pk=message.pk).update(created_at=OLD)
    Message.objects.create(conversation=conversation, role="user", content="recent")
    log = RoutingLog.objects.create(query="analysed", decision={}, steward_ms=20)
    RoutingLog.objects.filter(pk=log.pk).update(created_at=OLD)

    result = apply_retention(days=30)

    assert (result.messages, result.routing_logs) == (1, 1)
    assert list(Message.objects.values_list("content", flat=True)) == ["recent"]
    summary = RetentionDay.objects.get()
    assert (summary.messages, summary.routing_logs, summary.p95_steward_ms) == (1, 1, 25)


def test_zero_days_keeps_everything(conversation):
    make_turn(conversation)
    result = apply_retention(days=0)
    assert result.cutoff is None and result.turns == 0 and Turn.objects.count() == 1
    assert not RetentionRun.objects.exists()


def test_the_command_dry_run_counts_and_changes_nothing(conversation):
    make_turn(conversation)
    out = StringIO()
    call_command("apply_retention", "--dry-run", "--days", "30", stdout=out)
    report = json.loads(out.getvalue())
    assert (report["dry_run"], report["turns"], report["events"], report["messages"], report["routing_logs"]) == (
        True, 1, 3, 2, 1)  # fmt: skip
    assert Turn.objects.count() == 1 and not RetentionDay.objects.exists() and not RetentionRun.objects.exists()

    call_command("apply_retention", "--days", "30", stdout=StringIO())
    assert not Turn.objects.exists()


@override_settings(TOOLHUB_RETENTION_DAYS=30)
def test_the_beat_task_applies_the_setting(conversation):
    from agents.tasks import apply_retention as task

    make_turn(conversation)
    assert task.apply().get()["turns"] == 1


@override_settings(TOOLHUB_RETENTION_DAYS=30)
def test_the_overview_shows_the_setting_and_the_last_run(client, conversation):
    make_turn(conversation)
    apply_retention()
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/").content.decode()
    assert "older than <strong>30 days</strong>" in page
    assert "removed 1 turn, 3 events, 2 messages, 1 routing log" in page
    assert '<span class="num" data-counter="turns_total">1</span> turns in total' in page


@pytest.mark.postgres  # SELECT ... FOR UPDATE SKIP LOCKED and row locks between two connections
@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_remove_each_old_turn_once_and_count_it_once(conversation):
    make_old_turns(conversation, 300)

    outcomes = at_once(2, lambda i: apply_retention(days=30, batch_size=20))

    assert [kind for kind, _ in outcomes] == ["ok", "ok"]
    assert sum(result.turns for _, result in outcomes) == 300
    assert sum(result.events for _, result in outcomes) == 900
    summary = RetentionDay.objects.get()
    assert (summary.turns_done, summary.events, summary.messages, summary.routing_logs) == (300, 900, 600, 300)
    assert sum(summary.turn_ms_buckets) == 300
    assert not Turn.objects.exists() and not TurnEvent.objects.exists() and not Message.objects.exists()


@pytest.mark.postgres  # a turn row another transaction holds is skipped (SKIP LOCKED), never waited for
@pytest.mark.django_db(transaction=True)
def test_a_turn_its_writer_holds_is_skipped_not_waited_for_and_goes_next_run(conversation):
    held, *others = make_old_turns(conversation, 5)
    locked, release = threading.Event(), threading.Event()

    def writer():
        with transaction.atomic():
            Turn.objects.select_for_update().get(pk=held)
            locked.set()
            release.wait(timeout=30)
        connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert locked.wait(timeout=10)
        result = apply_retention(days=30, batch_size=2)  # would hang here if it waited for the writer
        assert result.turns == 4
        assert list(Turn.objects.values_list("pk", flat=True)) == [held]
        assert TurnEvent.objects.filter(turn_id=held).count() == 3
    finally:
        release.set()
        thread.join(timeout=10)
    assert apply_retention(days=30).turns == 1
    assert RetentionDay.objects.get().turns_done == 5


@pytest.mark.postgres  # the partial indexes of migration 0020 match the retention scans' WHERE clauses
@pytest.mark.django_db
def test_the_older_than_scans_can_use_their_partial_indexes():
    cutoff = NOW - datetime.timedelta(days=30)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plans = []
        for queryset in (expired_turns(cutoff), expired_loose_messages(cutoff)):
            sql, params = queryset.only("id")[:500].query.sql_with_params()
            cursor.execute(f"EXPLAIN {sql}", params)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    assert "turn_finished_for_retention" in plans[0], plans[0]
    assert "message_without_turn" in plans[1], plans[1]
