"""Workflow state across turns: TTL, compare-and-set versions, idempotent submit, cleanup (SQLite is enough here)."""

import datetime
import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from agents.models import Conversation, Workflow
from agents.turns.workflows import (
    IdempotencyKeyReused,
    WorkflowClosed,
    WorkflowConflict,
    WorkflowError,
    WorkflowExpired,
    WorkflowNotFound,
    advance_workflow,
    cancel_workflow,
    cleanup_workflows,
    delete_expired_workflows,
    expire_workflows,
    http_status_for,
    start_workflow,
    submit_workflow,
)

pytestmark = pytest.mark.django_db

HOUR = datetime.timedelta(hours=1)


def make_user(username: str):
    """An owner; no password, no role: workflows care about identity only (and hashing is slow)."""
    return get_user_model().objects.create(username=username)


@pytest.fixture
def owner():
    return make_user("wf-owner")


@pytest.fixture
def conversation(owner):
    return Conversation.objects.create(owner=owner)


def start(conversation, **fields) -> Workflow:
    values = {"kind": "rule_creation", "phase": "rule_draft", "state": {"name": "Tết bonus"}} | fields
    return start_workflow(conversation=conversation, owner=conversation.owner, **values)


def backdate(workflow, by=datetime.timedelta(seconds=1)) -> None:
    """Time passes: the workflow's expiry is now in the past."""
    Workflow.objects.filter(pk=workflow.pk).update(expires_at=timezone.now() - by)


class RecordMaker:
    """A create_record that counts its calls and answers a new record each time."""

    def __init__(self):
        self.calls = 0

    def __call__(self, workflow):
        self.calls += 1
        return {"record_id": self.calls, "workflow": workflow.pk, "phase": workflow.phase}


# --- start ---------------------------------------------------------------------


def test_start_creates_an_active_workflow_at_version_1_that_expires_after_the_ttl(conversation, settings):
    settings.TOOLHUB_WORKFLOW_TTL_SECONDS = 600
    before = timezone.now()
    workflow = start(conversation)
    stored = Workflow.objects.get(pk=workflow.pk)
    assert (stored.status, stored.version, stored.phase, stored.idempotency_key) == ("active", 1, "rule_draft", "")
    assert stored.state == {"name": "Tết bonus"}
    assert (
        before + datetime.timedelta(seconds=600)
        <= stored.expires_at
        <= timezone.now() + datetime.timedelta(seconds=600)
    )


def test_start_takes_an_explicit_ttl_and_refuses_a_non_positive_one(conversation):
    workflow = start(conversation, ttl=datetime.timedelta(seconds=30))
    assert workflow.expires_at <= timezone.now() + datetime.timedelta(seconds=30)
    with pytest.raises(ValueError):
        start(conversation, ttl=datetime.timedelta(0))


# --- advance -------------------------------------------------------------------


def test_advance_bumps_the_version_merges_state_and_renews_the_expiry(conversation):
    workflow = start(conversation, ttl=datetime.timedelta(seconds=30))
    advanced = advance_workflow(
        workflow_id=workflow.pk, expected_version=1, phase="rule_review", state_changes={"points": 5}
    )
    stored = Workflow.objects.get(pk=workflow.pk)
    assert (advanced.version, advanced.phase, advanced.state) == (2, "rule_review", {"name": "Tết bonus", "points": 5})
    assert (stored.version, stored.phase, stored.state) == (2, "rule_review", {"name": "Tết bonus", "points": 5})
    assert stored.expires_at > timezone.now() + datetime.timedelta(minutes=30)  # renewed with the default TTL
    assert stored.expires_at == advanced.expires_at


def test_advance_without_a_phase_keeps_the_phase(conversation):
    workflow = start(conversation)
    advanced = advance_workflow(workflow_id=workflow.pk, expected_version=1, state_changes={"name": "Spring"})
    assert (advanced.phase, advanced.state, advanced.version) == ("rule_draft", {"name": "Spring"}, 2)


def test_advance_from_a_stale_version_is_a_conflict_that_names_the_current_version(conversation):
    workflow = start(conversation)
    advance_workflow(workflow_id=workflow.pk, expected_version=1, state_changes={"points": 5})
    with pytest.raises(WorkflowConflict, match="at version 2, not 1.*retry") as caught:
        advance_workflow(workflow_id=workflow.pk, expected_version=1, state_changes={"points": 9})
    assert caught.value.current_version == 2
    assert http_status_for(caught.value) == 409
    assert Workflow.objects.get(pk=workflow.pk).state == {"name": "Tết bonus", "points": 5}


@pytest.mark.postgres  # the conditional UPDATE of compare-and-set under PostgreSQL's row versions
def test_a_write_that_lost_the_race_after_reading_matches_no_row_and_is_a_conflict(conversation, monkeypatch):
    """Both writers read version 1; the other one's UPDATE lands between this one's read and its write."""
    from agents.turns import workflows

    workflow = start(conversation)
    real_load = workflows._load

    def load_then_lose_the_race(workflow_id):
        read = real_load(workflow_id)
        monkeypatch.setattr(workflows, "_load", real_load)
        advance_workflow(workflow_id=workflow_id, expected_version=1, state_changes={"winner": "other"})
        return read

    monkeypatch.setattr(workflows, "_load", load_then_lose_the_race)
    with pytest.raises(WorkflowConflict):
        advance_workflow(workflow_id=workflow.pk, expected_version=1, state_changes={"winner": "me"})
    stored = Workflow.objects.get(pk=workflow.pk)
    assert (stored.version, stored.state) == (2, {"name": "Tết bonus", "winner": "other"})


def test_an_expired_workflow_never_advances_even_before_the_cleanup_marks_it(conversation):
    workflow = start(conversation)
    backdate(workflow)
    with pytest.raises(WorkflowExpired) as caught:
        advance_workflow(workflow_id=workflow.pk, expected_version=1, phase="rule_review")
    assert http_status_for(caught.value) == 410
    assert isinstance(caught.value, WorkflowClosed)
    expire_workflows()
    with pytest.raises(WorkflowExpired):
        advance_workflow(workflow_id=workflow.pk, expected_version=2, phase="rule_review")
    assert Workflow.objects.get(pk=workflow.pk).phase == "rule_draft"


def test_a_cancelled_workflow_never_advances(conversation):
    workflow = start(conversation)
    cancelled = cancel_workflow(workflow_id=workflow.pk, expected_version=1)
    assert (cancelled.status, cancelled.version) == ("cancelled", 2)
    with pytest.raises(WorkflowClosed) as caught:
        advance_workflow(workflow_id=workflow.pk, expected_version=2, phase="rule_review")
    assert not isinstance(caught.value, WorkflowExpired)
    assert http_status_for(caught.value) == 409


def test_cancel_is_compare_and_set_too(conversation):
    workflow = start(conversation)
    advance_workflow(workflow_id=workflow.pk, expected_version=1)
    with pytest.raises(WorkflowConflict):
        cancel_workflow(workflow_id=workflow.pk, expected_version=1)
    assert Workflow.objects.get(pk=workflow.pk).status == "active"


def test_an_unknown_workflow_is_not_found():
    with pytest.raises(WorkflowNotFound) as caught:
        advance_workflow(workflow_id=987654, expected_version=1)
    assert http_status_for(caught.value) == 404
    assert http_status_for(RuntimeError("boom")) == 500


# --- submit --------------------------------------------------------------------


def test_submit_runs_create_record_once_and_stores_the_result(conversation, owner):
    workflow = start(conversation)
    make_record = RecordMaker()
    result = submit_workflow(
        workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
    )
    stored = Workflow.objects.get(pk=workflow.pk)
    assert result == {"record_id": 1, "workflow": workflow.pk, "phase": "rule_draft"}
    assert (stored.status, stored.version, stored.idempotency_key, stored.result) == ("submitted", 2, "k-1", result)
    assert make_record.calls == 1


def test_idempotency_same_key_returns_the_first_result_and_never_creates_a_second_record(conversation, owner):
    workflow = start(conversation)
    make_record = RecordMaker()
    answers = [
        submit_workflow(
            workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
        )
        for _ in range(3)
    ]
    assert answers == [answers[0]] * 3
    assert make_record.calls == 1
    assert Workflow.objects.get(pk=workflow.pk).version == 2


def test_idempotency_a_submitted_workflow_is_never_resubmitted_with_another_key(conversation, owner):
    workflow = start(conversation)
    make_record = RecordMaker()
    submit_workflow(
        workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
    )
    with pytest.raises(WorkflowClosed, match="another idempotency key"):
        submit_workflow(
            workflow_id=workflow.pk, owner=owner, idempotency_key="k-2", expected_version=2, create_record=make_record
        )
    assert make_record.calls == 1
    assert Workflow.objects.get(pk=workflow.pk).idempotency_key == "k-1"


@pytest.mark.postgres  # the unique (owner, key) constraint in PostgreSQL
def test_idempotency_a_key_that_submitted_one_workflow_cannot_submit_another(conversation, owner):
    first, second = start(conversation), start(conversation)
    make_record = RecordMaker()
    submit_workflow(
        workflow_id=first.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
    )
    with pytest.raises(IdempotencyKeyReused) as caught:
        submit_workflow(
            workflow_id=second.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
        )
    assert http_status_for(caught.value) == 422
    assert make_record.calls == 1
    stored = Workflow.objects.get(pk=second.pk)
    assert (stored.status, stored.idempotency_key, stored.version) == ("active", "", 1)


@pytest.mark.postgres  # the unique (owner, key) constraint in PostgreSQL
def test_idempotency_keys_are_per_owner(conversation, owner):
    other = make_user("wf-other")
    mine, theirs = start(conversation), start(Conversation.objects.create(owner=other))
    make_record = RecordMaker()
    submit_workflow(
        workflow_id=mine.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
    )
    submit_workflow(
        workflow_id=theirs.pk, owner=other, idempotency_key="k-1", expected_version=1, create_record=make_record
    )
    assert make_record.calls == 2


def test_submit_by_another_owner_is_not_found(conversation):
    workflow = start(conversation)
    with pytest.raises(WorkflowNotFound):
        submit_workflow(
            workflow_id=workflow.pk,
            owner=make_user("wf-stranger"),
            idempotency_key="k-1",
            expected_version=1,
            create_record=RecordMaker(),
        )


def test_submit_from_a_stale_version_is_a_conflict_and_creates_nothing(conversation, owner):
    workflow = start(conversation)
    advance_workflow(workflow_id=workflow.pk, expected_version=1)
    make_record = RecordMaker()
    with pytest.raises(WorkflowConflict):
        submit_workflow(
            workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
        )
    assert make_record.calls == 0


@pytest.mark.parametrize("close", ["expire", "cancel"])
def test_an_expired_or_cancelled_workflow_is_never_submitted(conversation, owner, close):
    workflow = start(conversation)
    if close == "expire":
        backdate(workflow)
    else:
        cancel_workflow(workflow_id=workflow.pk, expected_version=1)
    make_record = RecordMaker()
    with pytest.raises(WorkflowExpired if close == "expire" else WorkflowClosed):
        submit_workflow(
            workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
        )
    assert make_record.calls == 0


def test_a_failing_create_record_leaves_the_workflow_active_and_the_key_unused(conversation, owner):
    workflow = start(conversation)

    def fail(_workflow):
        Conversation.objects.create(owner=owner, title="half-made record")
        raise RuntimeError("record store down")

    with pytest.raises(RuntimeError):
        submit_workflow(
            workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=fail
        )
    stored = Workflow.objects.get(pk=workflow.pk)
    assert (stored.status, stored.idempotency_key, stored.version, stored.result) == ("active", "", 1, None)
    assert not Conversation.objects.filter(title="half-made record").exists()
    make_record = RecordMaker()
    submit_workflow(
        workflow_id=workflow.pk, owner=owner, idempotency_key="k-1", expected_version=1, create_record=make_record
    )
    assert make_record.calls == 1


@pytest.mark.parametrize("key", ["", "k" * 201])
def test_submit_refuses_an_empty_or_overlong_key(conversation, owner, key):
    workflow = start(conversation)
    with pytest.raises(WorkflowError) as caught:
        submit_workflow(
            workflow_id=workflow.pk,
            owner=owner,
            idempotency_key=key,
            expected_version=1,
            create_record=lambda workflow: {"ok": True},
        )
    assert http_status_for(caught.value) == 400


# --- expiry and cleanup --------------------------------------------------------


def test_expire_marks_only_active_workflows_past_their_expiry(conversation, owner):
    live, old, cancelled, submitted = (start(conversation) for _ in range(4))
    cancel_workflow(workflow_id=cancelled.pk, expected_version=1)
    submit_workflow(
        workflow_id=submitted.pk,
        owner=owner,
        idempotency_key="k",
        expected_version=1,
        create_record=lambda workflow: {"ok": True},
    )
    for workflow in (old, cancelled, submitted):
        backdate(workflow)
    assert expire_workflows() == 1
    statuses = dict(Workflow.objects.values_list("pk", "status"))
    assert statuses == {live.pk: "active", old.pk: "expired", cancelled.pk: "cancelled", submitted.pk: "submitted"}
    assert Workflow.objects.get(pk=old.pk).version == 2  # every write bumps the version
    assert expire_workflows() == 0


@pytest.mark.postgres  # one UPDATE ... WHERE pk IN (SELECT ... LIMIT) statement per batch in PostgreSQL
def test_expire_works_in_batches_of_one_statement_each(conversation):
    workflows = [start(conversation) for _ in range(7)]
    Workflow.objects.filter(pk__in=[w.pk for w in workflows]).update(expires_at=timezone.now() - HOUR)
    with CaptureQueriesContext(connection) as queries:
        assert expire_workflows(batch_size=3) == 7
    assert len(queries) == 4  # 3 + 3 + 1, then one that finds nothing


def test_expiry_never_touches_an_unexpired_workflow_at_the_boundary(conversation):
    workflow = start(conversation)
    now = timezone.now()
    Workflow.objects.filter(pk=workflow.pk).update(expires_at=now + datetime.timedelta(microseconds=1))
    assert expire_workflows(now=now) == 0
    assert cleanup_workflows(now=now) == {"expired": 0, "deleted": 0}
    assert Workflow.objects.get(pk=workflow.pk).status == "active"


def test_delete_removes_workflows_past_the_cutoff_except_submitted_ones(conversation, owner):
    expired, cancelled, never_marked, submitted, recent = (start(conversation) for _ in range(5))
    expire_target = timezone.now() - 3 * HOUR
    cancel_workflow(workflow_id=cancelled.pk, expected_version=1)
    submit_workflow(
        workflow_id=submitted.pk,
        owner=owner,
        idempotency_key="k",
        expected_version=1,
        create_record=lambda workflow: {"ok": True},
    )
    Workflow.objects.exclude(pk=recent.pk).update(expires_at=expire_target)
    expire_workflows()
    backdate(recent, by=datetime.timedelta(minutes=1))
    assert delete_expired_workflows(older_than=timezone.now() - HOUR, batch_size=2) == 3
    assert set(Workflow.objects.values_list("pk", flat=True)) == {submitted.pk, recent.pk}
    assert never_marked.pk not in set(Workflow.objects.values_list("pk", flat=True))


def test_cleanup_deletes_what_expired_one_ttl_ago_and_marks_what_expired_since(conversation, settings):
    settings.TOOLHUB_WORKFLOW_TTL_SECONDS = 3600
    long_gone, just_expired, live = (start(conversation) for _ in range(3))
    backdate(long_gone, by=2 * HOUR)
    backdate(just_expired, by=datetime.timedelta(minutes=5))
    assert cleanup_workflows() == {"expired": 1, "deleted": 1}
    statuses = dict(Workflow.objects.values_list("pk", "status"))
    assert statuses == {just_expired.pk: "expired", live.pk: "active"}
    assert cleanup_workflows() == {"expired": 0, "deleted": 0}  # a second run is a no-op


def test_cleanup_task_returns_the_counts(conversation):
    from agents.tasks import cleanup_expired_workflows

    backdate(start(conversation))
    # apply() runs the task here, whatever broker this run is configured with.
    assert cleanup_expired_workflows.apply().get() == {"expired": 1, "deleted": 0}


# --- the invariants, over any sequence of operations ----------------------------

KEYS = ("key-a", "key-b", "key-c")
users = itertools.count()


class WorkflowLifecycle(RuleBasedStateMachine):
    """A model of each workflow (status, version, state, key, result) checked against the database after every step."""

    def __init__(self):
        super().__init__()
        self.owner = make_user(f"wf-machine-{next(users)}")
        self.conversation = Conversation.objects.create(owner=self.owner)
        self.model: dict[int, dict] = {}
        self.records = 0
        self.highest_version: dict[int, int] = {}

    def create_record(self, workflow):
        self.records += 1
        return {"record": self.records, "workflow": workflow.pk}

    def pick(self, index: int) -> tuple[int, dict]:
        pk = sorted(self.model)[index % len(self.model)]
        return pk, self.model[pk]

    def is_live(self, entry) -> bool:
        return entry["status"] == "active" and not entry["time_passed"]

    @rule(phase=st.sampled_from(["draft", "review"]), value=st.integers(0, 9))
    def start(self, phase, value):
        workflow = start_workflow(
            conversation=self.conversation, owner=self.owner, kind="k", phase=phase, state={"v": value}
        )
        self.model[workflow.pk] = {
            "status": "active",
            "version": 1,
            "phase": phase,
            "state": {"v": value},
            "time_passed": False,
            "key": "",
            "result": None,
        }

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50), lag=st.integers(0, 2), phase=st.sampled_from(["draft", "review", "confirm"]),
          field=st.sampled_from(["v", "w"]), value=st.integers(0, 9))  # fmt: skip
    def advance(self, index, lag, phase, field, value):
        pk, entry = self.pick(index)
        expected = entry["version"] - lag
        try:
            workflow = advance_workflow(
                workflow_id=pk, expected_version=expected, phase=phase, state_changes={field: value}
            )
        except WorkflowExpired:
            assert entry["status"] == "expired" or (entry["status"] == "active" and entry["time_passed"])
        except WorkflowClosed:
            assert entry["status"] in ("submitted", "cancelled")
        except WorkflowConflict:
            assert self.is_live(entry) and lag > 0
        else:
            assert self.is_live(entry) and lag == 0, "only a live workflow at its current version advances"
            entry["version"] += 1
            entry["phase"] = phase
            entry["state"] = entry["state"] | {field: value}
            assert (workflow.version, workflow.phase, workflow.state) == (entry["version"], phase, entry["state"])

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50), key=st.sampled_from(KEYS), lag=st.integers(0, 1))
    def submit(self, index, key, lag):
        pk, entry = self.pick(index)
        records_before = self.records
        try:
            result = submit_workflow(
                workflow_id=pk,
                owner=self.owner,
                idempotency_key=key,
                expected_version=entry["version"] - lag,
                create_record=self.create_record,
            )
        except IdempotencyKeyReused:
            assert self.is_live(entry) and lag == 0
            assert any(other["key"] == key for other in self.model.values())
        except WorkflowExpired:
            assert entry["status"] == "expired" or (entry["status"] == "active" and entry["time_passed"])
        except WorkflowClosed:
            assert entry["status"] == "cancelled" or (entry["status"] == "submitted" and entry["key"] != key)
        except WorkflowConflict:
            assert self.is_live(entry) and lag > 0
        else:
            if entry["status"] == "submitted":
                assert entry["key"] == key and result == entry["result"], "same key, same first result"
                assert self.records == records_before, "a resubmission never creates a record"
            else:
                assert self.is_live(entry) and lag == 0
                assert not any(other["key"] == key for other in self.model.values())
                assert self.records == records_before + 1
                entry.update(status="submitted", key=key, result=result, version=entry["version"] + 1)

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50), lag=st.integers(0, 1))
    def cancel(self, index, lag):
        pk, entry = self.pick(index)
        try:
            cancel_workflow(workflow_id=pk, expected_version=entry["version"] - lag)
        except WorkflowExpired:
            assert entry["status"] == "expired" or (entry["status"] == "active" and entry["time_passed"])
        except WorkflowClosed:
            assert entry["status"] in ("submitted", "cancelled")
        except WorkflowConflict:
            assert self.is_live(entry) and lag > 0
        else:
            assert self.is_live(entry) and lag == 0
            entry.update(status="cancelled", version=entry["version"] + 1)

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50))
    def time_passes(self, index):
        pk, entry = self.pick(index)
        Workflow.objects.filter(pk=pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
        entry["time_passed"] = True

    @rule()
    def expire(self):
        marked = expire_workflows(batch_size=2)
        due = [e for e in self.model.values() if e["status"] == "active" and e["time_passed"]]
        assert marked == len(due)
        for entry in due:
            entry.update(status="expired", version=entry["version"] + 1)

    @invariant()
    def database_matches_the_model_and_versions_only_grow(self):
        stored = {
            row[0]: row[1:]
            for row in Workflow.objects.filter(owner=self.owner).values_list(
                "pk", "status", "version", "phase", "state", "idempotency_key", "result"
            )
        }
        assert set(stored) == set(self.model)
        for pk, (status, version, phase, state, key, result) in stored.items():
            entry = self.model[pk]
            assert (status, version, phase, state, key, result) == (
                entry["status"], entry["version"], entry["phase"], entry["state"], entry["key"], entry["result"]
            )  # fmt: skip
            assert version >= self.highest_version.get(pk, 1)
            self.highest_version[pk] = version
        assert self.records == sum(1 for e in self.model.values() if e["status"] == "submitted")

    def teardown(self):
        self.owner.delete()


def test_workflow_invariants_hold_over_any_sequence_of_start_advance_submit_cancel_expire():
    run_state_machine_as_test(
        WorkflowLifecycle, settings=hypothesis_settings(max_examples=150, stateful_step_count=40, deadline=None)
    )
