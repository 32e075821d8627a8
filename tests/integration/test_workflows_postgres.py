"""Workflow guarantees under real concurrency on PostgreSQL, cleanup on a real Celery worker, restart safety."""

import datetime
import signal
import sys
import threading
import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.models import Conversation, Turn, Workflow
from agents.turns import workflows
from agents.turns.start import create_turn
from agents.turns.workflows import (
    IdempotencyKeyReused,
    WorkflowConflict,
    advance_workflow,
    start_workflow,
    submit_workflow,
)
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer
from demo.catalog import load_demo_catalog
from tests.support.builders import at_once, restore_migrated_routing_data
from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import celery_worker, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TTL = datetime.timedelta(seconds=settings.TOOLHUB_WORKFLOW_TTL_SECONDS)


def make_conversation(username="wf-owner") -> Conversation:
    owner = get_user_model().objects.create(username=username)
    return Conversation.objects.create(owner=owner)


def start(conversation, **fields) -> Workflow:
    values = {"kind": "rule_creation", "phase": "rule_draft", "state": {"name": "Tết bonus"}} | fields
    return start_workflow(conversation=conversation, owner=conversation.owner, **values)


class CountedRecords:
    """A create_record with a real side effect: one Conversation row per call, plus a thread-safe call count."""

    def __init__(self, title: str):
        self.title = title
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, workflow):
        with self.lock:
            self.calls += 1
        record = Conversation.objects.create(owner_id=workflow.owner_id, title=self.title)
        time.sleep(0.2)  # hold the transaction open: the other callers pile up behind it
        return {"record_id": record.pk, "phase": workflow.phase}


LEASE = 2  # seconds: a killed worker's turn counts as stalled (agents/turns/watchdog.py) this soon


def worker_env() -> tuple[dict, str]:
    """A worker on its own queue (another test run's worker on the same Redis never takes these tasks), with this
    test's TTL; it never searches the catalog."""
    queue = f"wf-itest-{uuid.uuid4().hex[:12]}"
    env = database_env(
        TOOLHUB_WORKFLOW_TTL=str(settings.TOOLHUB_WORKFLOW_TTL_SECONDS),
        TOOLHUB_WARM_START="0",
        TOOLHUB_CELERY_QUEUE=queue,
        TOOLHUB_TURN_LEASE=str(LEASE),
    )
    return env, queue


def cleanup_on(queue: str) -> dict:
    return app.send_task("agents.tasks.cleanup_expired_workflows", queue=queue).get(timeout=300)


# --- idempotency ---------------------------------------------------------------


def test_idempotency_twenty_concurrent_submits_with_one_key_create_one_record_and_one_answer():
    conversation = make_conversation()
    workflow = start(conversation)
    make_record = CountedRecords("record of the concurrent submit")

    outcomes = at_once(
        20,
        lambda i: submit_workflow(
            workflow_id=workflow.pk,
            owner=conversation.owner,
            idempotency_key="submit-1",
            expected_version=1,
            create_record=make_record,
        ),
    )

    assert [kind for kind, _ in outcomes] == ["ok"] * 20, outcomes
    answers = [answer for _, answer in outcomes]
    assert make_record.calls == 1
    records = Conversation.objects.filter(title="record of the concurrent submit")
    assert records.count() == 1
    stored = Workflow.objects.get(pk=workflow.pk)
    assert (stored.status, stored.version, stored.idempotency_key) == ("submitted", 2, "submit-1")
    assert answers == [stored.result] * 20
    assert stored.result == {"record_id": records.get().pk, "phase": "rule_draft"}


def test_idempotency_one_key_on_ten_workflows_at_once_submits_exactly_one():
    conversation = make_conversation()
    candidates = [start(conversation) for _ in range(10)]
    make_record = CountedRecords("record of the shared key")

    outcomes = at_once(
        10,
        lambda i: submit_workflow(
            workflow_id=candidates[i].pk,
            owner=conversation.owner,
            idempotency_key="shared-key",
            expected_version=1,
            create_record=make_record,
        ),
    )

    succeeded = [i for i, (kind, _) in enumerate(outcomes) if kind == "ok"]
    refused = [value for kind, value in outcomes if kind == "error"]
    assert len(succeeded) == 1, outcomes
    assert len(refused) == 9 and all(isinstance(error, IdempotencyKeyReused) for error in refused), refused
    assert make_record.calls == 1
    assert Conversation.objects.filter(title="record of the shared key").count() == 1
    submitted = Workflow.objects.filter(owner=conversation.owner, status="submitted")
    assert list(submitted.values_list("pk", "idempotency_key")) == [(candidates[succeeded[0]].pk, "shared-key")]
    assert Workflow.objects.filter(owner=conversation.owner, status="active", idempotency_key="").count() == 9


# --- compare-and-set ----------------------------------------------------------


def test_conflict_two_concurrent_advances_from_one_version_one_wins_and_the_winner_state_is_stored(monkeypatch):
    """Both writers are held until both have read version 1, so both UPDATEs really race."""
    conversation = make_conversation()
    real_load = workflows._load
    for round_ in range(10):
        workflow = start(conversation)
        both_read = threading.Barrier(2)
        first_reads = threading.local()

        def load_and_wait(workflow_id, both_read=both_read, first_reads=first_reads):
            read = real_load(workflow_id)
            if not getattr(first_reads, "done", False):  # not again when the loser re-reads to explain
                first_reads.done = True
                both_read.wait(timeout=30)
            return read

        monkeypatch.setattr(workflows, "_load", load_and_wait)
        outcomes = at_once(
            2,
            lambda i, workflow=workflow: advance_workflow(
                workflow_id=workflow.pk,
                expected_version=1,
                phase=f"phase_of_writer_{i}",
                state_changes={"writer": i, f"only_writer_{i}": True},
            ),
        )
        monkeypatch.setattr(workflows, "_load", real_load)

        winners = [value for kind, value in outcomes if kind == "ok"]
        losers = [value for kind, value in outcomes if kind == "error"]
        assert len(winners) == 1 and len(losers) == 1, (round_, outcomes)
        assert isinstance(losers[0], WorkflowConflict), losers
        assert losers[0].current_version == 2
        stored = Workflow.objects.get(pk=workflow.pk)
        winner = winners[0]
        assert (stored.version, stored.phase, stored.state) == (2, winner.phase, winner.state)
        assert stored.state == {"name": "Tết bonus", "writer": winner.state["writer"], **{
            f"only_writer_{winner.state['writer']}": True}}  # fmt: skip


def test_conflict_eight_writers_on_one_workflow_never_lose_an_update():
    """Each writer retries on conflict until its own key lands: every success is in the final state exactly once."""
    conversation = make_conversation()
    workflow = start(conversation, state={})

    def writer(i):
        conflicts = 0
        for step in range(5):
            while True:
                current = Workflow.objects.values_list("version", flat=True).get(pk=workflow.pk)
                try:
                    advance_workflow(
                        workflow_id=workflow.pk, expected_version=current, state_changes={f"{i}-{step}": 1}
                    )
                    break
                except WorkflowConflict:
                    conflicts += 1
        return conflicts

    outcomes = at_once(8, writer)
    assert [kind for kind, _ in outcomes] == ["ok"] * 8, outcomes
    stored = Workflow.objects.get(pk=workflow.pk)
    assert stored.version == 1 + 8 * 5
    assert set(stored.state) == {f"{i}-{step}" for i in range(8) for step in range(5)}


# --- expiry, on a real worker ---------------------------------------------------


def test_expiry_cleanup_task_on_a_real_worker_removes_exactly_the_expired_workflows():
    conversation = make_conversation()
    now = timezone.now()

    def rows(count, *, expires_at, **fields):
        return [
            Workflow(conversation=conversation, owner=conversation.owner, kind="bulk", phase="draft",
                     expires_at=expires_at, **fields)
            for _ in range(count)
        ]  # fmt: skip

    # 10,000 expired: half within the last TTL (marked expired), half longer ago (deleted).
    just_expired = Workflow.objects.bulk_create(rows(5_000, expires_at=now - datetime.timedelta(minutes=5)))
    long_expired = Workflow.objects.bulk_create(rows(5_000, expires_at=now - TTL - datetime.timedelta(minutes=5)))
    live = Workflow.objects.bulk_create(rows(100, expires_at=now + datetime.timedelta(minutes=30)))
    submitted = Workflow.objects.bulk_create(
        [
            Workflow(conversation=conversation, owner=conversation.owner, kind="bulk", phase="done",
                     status="submitted", idempotency_key=f"key-{i}", result={"i": i},
                     expires_at=now - 3 * TTL)
            for i in range(10)
        ]
    )  # fmt: skip

    env, queue = worker_env()
    with celery_worker(env, app):
        first = cleanup_on(queue)
        second = cleanup_on(queue)

    assert first == {"expired": 5_000, "deleted": 5_000}
    assert second == {"expired": 0, "deleted": 0}
    remaining = dict(Workflow.objects.values_list("pk", "status"))
    assert set(remaining) == {w.pk for w in just_expired + live + submitted}
    assert not Workflow.objects.filter(pk__in=[w.pk for w in long_expired]).exists()
    assert {remaining[w.pk] for w in just_expired} == {"expired"}
    assert {remaining[w.pk] for w in submitted} == {"submitted"}
    live_rows = Workflow.objects.filter(pk__in=[w.pk for w in live])
    assert set(live_rows.values_list("status", "version")) == {("active", 1)}


# --- restart safety -------------------------------------------------------------

CREATE_RULE = "Create a rule for campaign cmp_bday0001 named Birthday triple points"


def wait_for_turn(turn_id: int, status: str, seconds: float = 120) -> Turn:
    deadline = time.monotonic() + seconds
    while (turn := Turn.objects.get(pk=turn_id)).status != status:
        assert time.monotonic() < deadline, f"turn {turn_id} is {turn.status}, not {status}, after {seconds} s"
        time.sleep(0.2)
    return turn


def send_turn(turn_id: int, queue: str) -> None:
    app.send_task("agents.tasks.run_turn", args=[turn_id], queue=queue)


def offered(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def test_restart_a_rule_workflow_continues_from_its_stored_phase_after_its_worker_is_killed_mid_turn(tmp_path):
    """The staged rule flow runs in a real worker; the worker dies (SIGKILL) inside the next turn; a new
    worker runs that turn again (as the broker's redelivery of the unacked task would) from the phase stored
    in PostgreSQL, with nothing kept in any process's memory."""
    restore_migrated_routing_data()  # the router reads them; an earlier transactional test flushed them
    load_demo_catalog()
    loyalty = McpServer.objects.create(
        name="loyalty", command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(tmp_path / "loyalty.sqlite3")],
    )  # fmt: skip
    assert sync_server(loyalty).ok
    conversation = make_conversation()
    env, queue = worker_env()
    with ScriptedOpenAI() as model:
        env |= {"TOOLHUB_MODEL_BASE_URL": model.base_url, "TOOLHUB_MODEL": "scripted", "TOOLHUB_MODEL_RETRIES": "0"}
        model.steps = [
            {"tool_calls": [{"name": "create_rule_draft",
                             "arguments": {"campaign_id": "cmp_bday0001", "name": "Birthday triple points"}}]},
            {"content": "Draft opened. Which formula type?"},
        ]  # fmt: skip
        with celery_worker(env, app) as first_worker:
            first = create_turn(conversation, CREATE_RULE)
            send_turn(first.pk, queue)
            wait_for_turn(first.pk, Turn.Status.DONE)
            workflow = Workflow.objects.get(conversation=conversation)
            assert (workflow.kind, workflow.phase, workflow.version) == ("loyalty_rule", "rule_formula", 2)

            model.behaviour, model.delay = "slow", 600  # the model never answers: the worker is mid-turn
            second = create_turn(conversation, "Use a multiplier")
            asked = len(model.requests)
            send_turn(second.pk, queue)
            deadline = time.monotonic() + 120
            while len(model.requests) == asked:
                assert time.monotonic() < deadline, "the worker never asked the model"
                time.sleep(0.2)
            first_worker.send_signal(signal.SIGKILL)  # no clean shutdown
            first_worker.wait(timeout=30)
        assert Turn.objects.get(pk=second.pk).status == Turn.Status.RUNNING
        time.sleep(LEASE + 1)  # a redelivered task restarts the turn only once its lease has lapsed

        model.behaviour = "ok"
        draft_id = workflow.state["ids"]["draft_id"]
        model.steps = [
            {"tool_calls": [{"name": "set_rule_formula",
                             "arguments": {"draft_id": draft_id, "formula": {"type": "multiplier"}}}]},
            {"content": "By which factor?"},
        ]  # fmt: skip
        restarted_at = len(model.requests)
        with celery_worker(env, app):  # a new worker: nothing of the old one's memory
            send_turn(second.pk, queue)
            wait_for_turn(second.pk, Turn.Status.DONE)

    request = model.requests[restarted_at]
    assert "set_rule_formula" in offered(request) and "create_rule_draft" not in offered(request)
    workflow.refresh_from_db()
    assert (workflow.status, workflow.phase, workflow.version) == ("active", "rule_formula", 3)
    assert workflow.state["choices"] == {"formula": "multiplier"}
    assert workflow.state["ids"]["draft_id"] == draft_id
    assert Workflow.objects.filter(conversation=conversation).count() == 1
    with pytest.raises(WorkflowConflict):  # the dead worker's view of the workflow is stale for good
        advance_workflow(workflow_id=workflow.pk, expected_version=2, phase="rule_criteria")
