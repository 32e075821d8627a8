"""Workflow state that lives across turns: TTL, compare-and-set versions, idempotent submit, cleanup.

Every write is one guarded statement in the database (``UPDATE ... WHERE
version = %s AND status = 'active' AND expires_at > now``) or runs under the
row lock of ``select_for_update``; this module never checks in Python and
then writes. Reads before a write only decide what to say when the guarded
write matches no row.

Lifecycle: ``start_workflow`` -> ``advance_workflow`` (any number of times;
each success bumps ``version`` by one and renews ``expires_at`` to now +
TTL) -> ``submit_workflow`` or ``cancel_workflow``. Every write, the cleanup's
included, bumps ``version``, so (id, version) names exactly one stored state.

Errors, all ``WorkflowError`` with an ``http_status`` (``http_status_for``):

- ``WorkflowNotFound`` (404): no such workflow (or not the submitter's).
- ``WorkflowConflict`` (409): stale ``expected_version``; re-read and retry.
- ``WorkflowClosed`` (409): submitted or cancelled, never writable again.
- ``WorkflowExpired`` (410, a ``WorkflowClosed``): past ``expires_at``.
- ``IdempotencyKeyReused`` (422): the owner's key already submitted another workflow.
- ``WorkflowError`` itself (400): a malformed request (e.g. an empty key).

Retention, in settings terms (``TOOLHUB_WORKFLOW_TTL``, run every
``TOOLHUB_WORKFLOW_CLEANUP_INTERVAL`` by the beat task
``agents.tasks.cleanup_expired_workflows`` -> ``cleanup_workflows``):

- an active workflow is writable until ``expires_at`` (start or last advance
  + TTL); after that every write refuses it at once, and the next cleanup
  marks it ``expired``;
- a workflow that is not submitted (expired, cancelled, or active but never
  marked) is deleted once its ``expires_at`` is one more TTL in the past, so
  a client coming back within that window hears "expired", not "not found";
- a submitted workflow is never deleted by the cleanup: its row is the
  idempotency record (the unique (owner, idempotency_key) constraint) and
  holds the first result.

It must never decide a race in Python, never run ``create_record`` twice
for one key, and never touch a workflow that is still live.
"""

import datetime
import logging
from collections.abc import Callable
from typing import Any, TypedDict, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from agents.models import Conversation, Workflow

log = logging.getLogger(__name__)

ACTIVE = Workflow.Status.ACTIVE
# The model's CharField sets max_length (the stubs type a field's max_length int | None).
IDEMPOTENCY_KEY_MAX_LENGTH = cast(int, Workflow._meta.get_field("idempotency_key").max_length)


class WorkflowError(Exception):
    """Base of every refusal of this module; ``http_status`` is what an endpoint answers."""

    http_status = 400

    def __init__(
        self,
        message: str,
        *,
        workflow_id: int | None = None,
        current_version: int | None = None,
        status: str | None = None,
    ):
        super().__init__(message)
        self.workflow_id = workflow_id
        self.current_version = current_version
        self.status = status


class WorkflowNotFound(WorkflowError):
    http_status = 404


class WorkflowConflict(WorkflowError):
    """The expected version is stale: another write came first."""

    http_status = 409


class WorkflowClosed(WorkflowError):
    """The workflow is no longer active (submitted, cancelled or expired)."""

    http_status = 409


class WorkflowExpired(WorkflowClosed):
    http_status = 410


class IdempotencyKeyReused(WorkflowError):
    """The same owner already used this key to submit a different workflow."""

    http_status = 422


def http_status_for(exc: Exception) -> int:
    """The HTTP status an endpoint answers for ``exc``: the workflow error's own, else 500."""
    return exc.http_status if isinstance(exc, WorkflowError) else 500


def default_ttl() -> datetime.timedelta:
    return datetime.timedelta(seconds=settings.TOOLHUB_WORKFLOW_TTL_SECONDS)


def _ttl(ttl: datetime.timedelta | None) -> datetime.timedelta:
    ttl = default_ttl() if ttl is None else ttl
    if ttl <= datetime.timedelta(0):
        raise ValueError(f"A workflow TTL must be positive, got {ttl}.")
    return ttl


def start_workflow(
    *,
    conversation: Conversation,
    owner: User,
    kind: str,
    phase: str,
    state: dict[str, Any] | None = None,
    ttl: datetime.timedelta | None = None,
) -> Workflow:
    """A new active workflow at version 1 that lives for ``ttl`` (default TOOLHUB_WORKFLOW_TTL) without progress."""
    return Workflow.objects.create(
        conversation=conversation,
        owner=owner,
        kind=kind,
        phase=phase,
        state=dict(state or {}),
        expires_at=timezone.now() + _ttl(ttl),
    )


def _load(workflow_id: int) -> Workflow:
    try:
        return Workflow.objects.get(pk=workflow_id)
    except Workflow.DoesNotExist:
        raise WorkflowNotFound(f"Workflow {workflow_id} does not exist.", workflow_id=workflow_id) from None


class _RefusalDetails(TypedDict):
    workflow_id: int
    current_version: int
    status: str


def _refusal(workflow: Workflow, expected_version: int, now: datetime.datetime) -> WorkflowError | None:
    """Why a write at ``expected_version`` cannot apply to this stored row, or None if it can."""
    details: _RefusalDetails = {
        "workflow_id": workflow.pk,
        "current_version": workflow.version,
        "status": workflow.status,
    }
    if workflow.status == Workflow.Status.EXPIRED or (workflow.status == ACTIVE and workflow.expires_at <= now):
        return WorkflowExpired(f"Workflow {workflow.pk} expired at {workflow.expires_at.isoformat()}.", **details)
    if workflow.status != ACTIVE:
        return WorkflowClosed(f"Workflow {workflow.pk} is {workflow.status}; it cannot change any more.", **details)
    if workflow.version != expected_version:
        return WorkflowConflict(
            f"Workflow {workflow.pk} is at version {workflow.version}, not {expected_version}: "
            "another change came first; read it again and retry from the current version.",
            **details,
        )
    return None


def _compare_and_set(workflow_id: int, expected_version: int, now: datetime.datetime, **changes: object) -> int:
    """One UPDATE that applies only to the active, unexpired row still at ``expected_version``."""
    return Workflow.objects.filter(pk=workflow_id, version=expected_version, status=ACTIVE, expires_at__gt=now).update(
        version=F("version") + 1, updated_at=now, **changes
    )


def _refuse(workflow_id: int, expected_version: int, now: datetime.datetime) -> WorkflowError:
    """The error for a compare-and-set that matched no row, from the row as it is now."""
    workflow = _load(workflow_id)
    return _refusal(workflow, expected_version, now) or WorkflowConflict(
        f"Workflow {workflow_id} changed during the update; read it again and retry.",
        workflow_id=workflow_id,
        current_version=workflow.version,
        status=workflow.status,
    )


def advance_workflow(
    *,
    workflow_id: int,
    expected_version: int,
    phase: str | None = None,
    state_changes: dict[str, Any] | None = None,
    ttl: datetime.timedelta | None = None,
) -> Workflow:
    """Compare-and-set: move to ``phase`` and merge ``state_changes`` (top-level keys) into the state.

    The new state is computed from the row read at ``expected_version``; the
    UPDATE applies only while the row is still at that version, so a writer
    that lost the race can never overwrite the winner's state. Success bumps
    the version by one and renews ``expires_at`` to now + ``ttl``.
    """
    now = timezone.now()
    workflow = _load(workflow_id)
    if refusal := _refusal(workflow, expected_version, now):
        raise refusal
    new_phase = workflow.phase if phase is None else phase
    new_state = workflow.state | (state_changes or {})
    expires_at = now + _ttl(ttl)
    if not _compare_and_set(
        workflow_id, expected_version, now, phase=new_phase, state=new_state, expires_at=expires_at
    ):
        raise _refuse(workflow_id, expected_version, now)
    workflow.version, workflow.phase, workflow.state = expected_version + 1, new_phase, new_state
    workflow.expires_at, workflow.updated_at = expires_at, now
    return workflow


def cancel_workflow(*, workflow_id: int, expected_version: int) -> Workflow:
    """Compare-and-set to cancelled; a cancelled workflow never changes again."""
    now = timezone.now()
    if not _compare_and_set(workflow_id, expected_version, now, status=Workflow.Status.CANCELLED):
        raise _refuse(workflow_id, expected_version, now)
    return _load(workflow_id)


def submit_workflow(
    *,
    workflow_id: int,
    owner: User,
    idempotency_key: str,
    expected_version: int,
    create_record: Callable[[Workflow], dict[str, Any]],
) -> dict[str, Any]:
    """Create the workflow's record once per (owner, idempotency_key) and return the first result.

    Under the workflow's row lock: a workflow already submitted with this key
    returns its stored result (whatever ``expected_version`` says); with
    another key it is refused. Otherwise the key is claimed first (the unique
    (owner, idempotency_key) constraint refuses a key that submitted another
    workflow, waiting for that transaction if it is still open), then
    ``create_record`` runs once in the same transaction, and its result is
    stored with status submitted. If ``create_record`` raises, everything
    rolls back: the workflow stays active and the key unused.
    """
    if not idempotency_key or len(idempotency_key) > IDEMPOTENCY_KEY_MAX_LENGTH:
        raise WorkflowError(f"An idempotency key has 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} characters.")
    with transaction.atomic():
        try:
            workflow = Workflow.objects.select_for_update().get(pk=workflow_id, owner=owner)
        except Workflow.DoesNotExist:
            raise WorkflowNotFound(f"Workflow {workflow_id} does not exist.", workflow_id=workflow_id) from None
        if workflow.status == Workflow.Status.SUBMITTED:
            if workflow.idempotency_key == idempotency_key:
                first: dict[str, Any] | None = workflow.result
                assert first is not None  # stored with status submitted, below
                return first
            raise WorkflowClosed(
                f"Workflow {workflow.pk} was already submitted with another idempotency key.",
                workflow_id=workflow.pk,
                current_version=workflow.version,
                status=workflow.status,
            )
        now = timezone.now()
        if refusal := _refusal(workflow, expected_version, now):
            raise refusal
        try:
            with transaction.atomic():
                Workflow.objects.filter(pk=workflow.pk).update(idempotency_key=idempotency_key)
        except IntegrityError:
            raise IdempotencyKeyReused(
                "This idempotency key already submitted another workflow; use a new key for a new submission.",
                workflow_id=workflow.pk,
                current_version=workflow.version,
                status=workflow.status,
            ) from None
        result = create_record(workflow)
        if not isinstance(result, dict):
            raise TypeError(f"create_record must return a dict, not {type(result).__name__}.")
        Workflow.objects.filter(pk=workflow.pk).update(
            status=Workflow.Status.SUBMITTED, result=result, version=F("version") + 1, updated_at=now
        )
        # Every caller gets the stored form, the first one included.
        stored: dict[str, Any] | None = Workflow.objects.values_list("result", flat=True).get(pk=workflow.pk)
        assert stored is not None  # the dict just stored
        return stored


def _in_batches(candidates: QuerySet[Workflow], batch_size: int, write: Callable[[QuerySet[Workflow]], int]) -> int:
    """Apply ``write`` to ``candidates`` one batch (one statement, one transaction) at a time."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1.")
    total = 0
    while count := write(candidates.filter(pk__in=candidates.order_by().values("pk")[:batch_size])):
        total += count
    return total


def expire_workflows(*, now: datetime.datetime | None = None, batch_size: int = 500) -> int:
    """Mark every active workflow past its expiry as expired, in batches; never touches unexpired ones."""
    now = now or timezone.now()
    candidates = Workflow.objects.filter(status=ACTIVE, expires_at__lte=now)
    expired = _in_batches(
        candidates,
        batch_size,
        lambda batch: batch.update(status=Workflow.Status.EXPIRED, version=F("version") + 1, updated_at=now),
    )
    log.info("expired %d workflow(s)", expired)
    return expired


def delete_expired_workflows(*, older_than: datetime.datetime, batch_size: int = 500) -> int:
    """Delete every workflow that is not submitted and whose expires_at is at or before ``older_than``."""
    candidates = Workflow.objects.filter(expires_at__lte=older_than).exclude(status=Workflow.Status.SUBMITTED)
    deleted = _in_batches(candidates, batch_size, lambda batch: batch.delete()[0])
    log.info("deleted %d workflow(s) expired at or before %s", deleted, older_than.isoformat())
    return deleted


def cleanup_workflows(*, now: datetime.datetime | None = None, batch_size: int = 500) -> dict[str, int]:
    """The periodic cleanup: delete what expired one TTL ago or earlier, then mark the rest expired."""
    now = now or timezone.now()
    deleted = delete_expired_workflows(older_than=now - default_ttl(), batch_size=batch_size)
    expired = expire_workflows(now=now, batch_size=batch_size)
    return {"expired": expired, "deleted": deleted}
