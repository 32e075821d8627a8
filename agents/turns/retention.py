"""Retention: finished turns older than TOOLHUB_RETENTION_DAYS go, with their events, messages and routing logs,
and so does a conversation they leave empty.

Each batch is one short transaction that adds what it removes to the day's RetentionDay (counts and latency
buckets, so the overview's totals stay right), takes it out of /metrics' summed days (MetricsDay,
agents/turns/rollup.py) and deletes it; a crash between batches loses nothing and counts nothing twice,
and a rerun carries on. It must never touch a turn that is not finished (queued, running, waiting
on an approval), nor any row of a conversation with an open (active) workflow. A conversation goes in the batch that
removed its last turn or message, when nothing of it is left (no turn, no message, no workflow of any status: a
submitted workflow keeps its idempotency key and result) and it was not updated since the cutoff; conversations are
never scanned as a whole. The beat task
(agents.tasks.apply_retention) and `manage.py apply_retention` both call apply_retention.
"""

import datetime
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, Model, OuterRef, Q, QuerySet
from django.utils import timezone

from agents.models import Conversation, Message, RetentionDay, RetentionRun, RoutingLog, Turn, TurnEvent, Workflow
from agents.turns import rollup

_Row = TypeVar("_Row", bound=Model)


@dataclass
class RetentionResult:
    """What one run removed (or, dry, would remove)."""

    retention_days: int
    cutoff: datetime.datetime | None
    dry_run: bool = False
    batches: int = 0
    turns: int = 0
    events: int = 0
    messages: int = 0
    routing_logs: int = 0
    conversations: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"cutoff": self.cutoff.isoformat() if self.cutoff else None}


@dataclass
class DayFigures(rollup.Figures):
    """One day's share of a batch, added to its RetentionDay: what /metrics' summed days count, and the events and
    messages removed."""

    events: int = 0
    messages: int = 0


class _ConversationOf(TypedDict):
    conversation_id: int


def _open_workflow_conversations() -> QuerySet[Workflow, _ConversationOf]:
    return Workflow.objects.filter(status=Workflow.Status.ACTIVE).values("conversation_id")


def expired_turns(cutoff: datetime.datetime) -> QuerySet[Turn]:
    """Finished turns that finished before `cutoff`, outside conversations with an open workflow, oldest first."""
    return (
        Turn.objects.filter(status__in=Turn.ENDED, finished_at__lt=cutoff)
        .exclude(conversation_id__in=_open_workflow_conversations())
        .order_by("finished_at", "id")
    )


def expired_loose_messages(cutoff: datetime.datetime) -> QuerySet[Message]:
    """Messages no turn owns (an API request's earlier messages) written before `cutoff`, oldest first."""
    return (
        Message.objects.filter(turn__isnull=True, created_at__lt=cutoff)
        .exclude(conversation_id__in=_open_workflow_conversations())
        .order_by("created_at", "id")
    )


def expired_loose_routing_logs(cutoff: datetime.datetime) -> QuerySet[RoutingLog]:
    """Routing logs of no turn (the steward run from `manage.py steward_analyze`) written before `cutoff`."""
    return RoutingLog.objects.filter(turn__isnull=True, created_at__lt=cutoff).order_by("created_at", "id")


def _left_empty(
    conversations: QuerySet[Conversation],
    cutoff: datetime.datetime,
    *,
    turns_going: QuerySet[Turn] | None = None,
    messages_going: QuerySet[Message] | None = None,
) -> QuerySet[Conversation]:
    """Those of `conversations` with no turn, message or workflow left, not updated since `cutoff`; the dry run
    names the turns and messages the run would delete, as if they had gone."""
    of_it = {"conversation": OuterRef("pk")}
    turns, messages = Turn.objects.filter(**of_it), Message.objects.filter(**of_it)
    if turns_going is not None:
        turns = turns.exclude(id__in=turns_going.values("id"))
    if messages_going is not None:
        messages = messages.exclude(id__in=messages_going.values("id"))
    return (
        conversations.filter(updated_at__lt=cutoff)
        .exclude(Exists(turns))
        .exclude(Exists(messages))
        .exclude(Exists(Workflow.objects.filter(**of_it)))
    )


def _delete_emptied(conversation_ids: set[int], cutoff: datetime.datetime) -> int:
    """Delete the conversations of a batch that it left empty; how many went."""
    emptied = _left_empty(Conversation.objects.filter(id__in=conversation_ids), cutoff)
    return emptied.delete()[1].get(Conversation._meta.label, 0)


LOG_FIELDS = ("turn_id", "created_at", "fallback", "steward_ms", "turn_ms", "catalog_schema_tokens",
              "loaded_schema_tokens", "deferred_listing_tokens")  # fmt: skip


def _locked(queryset: QuerySet[_Row], batch_size: int, *fields: str) -> list[_Row]:
    """The first `batch_size` rows of `queryset`, locked for this transaction; rows another holds are skipped
    (a second run at once takes other rows, and a turn its writer holds waits for the next run)."""
    return list(queryset.select_for_update(skip_locked=True, of=("self",)).only(*fields)[:batch_size])


def _record(figures: Mapping[datetime.date, DayFigures]) -> None:
    """Add each day's figures to its RetentionDay under a row lock (two runs at once add, never overwrite)."""
    for day, add in sorted(figures.items()):
        summary, _ = RetentionDay.objects.select_for_update().get_or_create(day=day)
        for name in (
            "turns_done",
            "turns_failed",
            "turns_cancelled",
            "events",
            "messages",
            "routing_logs",
            "fallbacks",
            "tokens_saved",
        ):
            setattr(summary, name, getattr(summary, name) + getattr(add, name))
        summary.turn_ms_buckets = _add_buckets(summary.turn_ms_buckets, add.turn_ms)
        summary.steward_ms_buckets = _add_buckets(summary.steward_ms_buckets, add.steward_ms)
        summary.save()


def _add_buckets(stored: list[int], added: list[int]) -> list[int]:
    stored = stored or [0] * len(added)
    return [a + b for a, b in zip(stored, added, strict=True)]


def _turn_batch(cutoff: datetime.datetime, batch_size: int, result: RetentionResult) -> bool:
    """Summarise and delete up to `batch_size` expired turns and their rows in one transaction; False when none."""
    with transaction.atomic():
        rollup.day_lock()
        turns = _locked(expired_turns(cutoff), batch_size, "id", "status", "created_at", "conversation_id")
        if not turns:
            return False
        ids = [turn.id for turn in turns]
        day_of_turn = {turn.id: turn.created_at.date() for turn in turns}
        figures: defaultdict[datetime.date, DayFigures] = defaultdict(DayFigures)
        summed: defaultdict[datetime.date, rollup.Figures] = defaultdict(rollup.Figures)  # by MetricsDay's days
        for turn in turns:
            figures[day_of_turn[turn.id]].add_turn(turn.status)
            summed[day_of_turn[turn.id]].add_turn(turn.status)
        for row in TurnEvent.objects.filter(turn_id__in=ids).values("turn_id").annotate(n=Count("id")).order_by():
            figures[day_of_turn[row["turn_id"]]].events += row["n"]
        for row in Message.objects.filter(turn_id__in=ids).values("turn_id").annotate(n=Count("id")).order_by():
            figures[day_of_turn[row["turn_id"]]].messages += row["n"]
        for log in RoutingLog.objects.filter(turn_id__in=ids).only(*LOG_FIELDS):
            assert log.turn_id is not None  # a log of one of these turns
            figures[day_of_turn[log.turn_id]].add_log(log)  # RetentionDay files a log by its turn's day
            summed[log.created_at.date()].add_log(log)  # MetricsDay by its own
        _record(figures)
        rollup.unsum(summed)
        result.events += TurnEvent.objects.filter(turn_id__in=ids).delete()[0]
        result.messages += Message.objects.filter(turn_id__in=ids).delete()[0]
        result.routing_logs += RoutingLog.objects.filter(turn_id__in=ids).delete()[0]
        result.turns += Turn.objects.filter(id__in=ids).delete()[1].get(Turn._meta.label, 0)
        result.conversations += _delete_emptied({turn.conversation_id for turn in turns}, cutoff)
    result.batches += 1
    return True


def _loose_messages_batch(cutoff: datetime.datetime, batch_size: int, result: RetentionResult) -> bool:
    """Summarise and delete up to `batch_size` expired messages of no turn in one transaction; False when none."""
    with transaction.atomic():
        messages = _locked(expired_loose_messages(cutoff), batch_size, "id", "created_at", "conversation_id")
        if not messages:
            return False
        figures: defaultdict[datetime.date, DayFigures] = defaultdict(DayFigures)
        for message in messages:
            figures[message.created_at.date()].messages += 1
        _record(figures)
        result.messages += Message.objects.filter(id__in=[message.id for message in messages]).delete()[0]
        result.conversations += _delete_emptied({message.conversation_id for message in messages}, cutoff)
    result.batches += 1
    return True


def _loose_logs_batch(cutoff: datetime.datetime, batch_size: int, result: RetentionResult) -> bool:
    """Summarise and delete up to `batch_size` expired routing logs of no turn in one transaction; False when none."""
    with transaction.atomic():
        rollup.day_lock()
        logs = _locked(expired_loose_routing_logs(cutoff), batch_size, *LOG_FIELDS)
        if not logs:
            return False
        figures: defaultdict[datetime.date, DayFigures] = defaultdict(DayFigures)
        summed: defaultdict[datetime.date, rollup.Figures] = defaultdict(rollup.Figures)
        for log in logs:
            figures[log.created_at.date()].add_log(log)
            summed[log.created_at.date()].add_log(log)
        _record(figures)
        rollup.unsum(summed)
        result.routing_logs += RoutingLog.objects.filter(id__in=[log.id for log in logs]).delete()[0]
    result.batches += 1
    return True


def _would_be_emptied(turns: QuerySet[Turn], cutoff: datetime.datetime) -> QuerySet[Conversation]:
    """The dry run's count: conversations the run would leave empty."""
    loose = expired_loose_messages(cutoff)
    going = Message.objects.filter(turn__in=turns) | loose
    touched = Conversation.objects.filter(
        Q(id__in=turns.values("conversation_id")) | Q(id__in=going.values("conversation_id"))
    )
    return _left_empty(touched, cutoff, turns_going=turns, messages_going=going)


def retention_cutoff(*, days: int, now: datetime.datetime | None = None) -> datetime.datetime | None:
    """Rows older than this go; None when retention is off (0 days: keep everything)."""
    if days <= 0:
        return None
    return (now or timezone.now()) - datetime.timedelta(days=days)


def apply_retention(*, days: int | None = None, now: datetime.datetime | None = None, batch_size: int | None = None,
                    dry_run: bool = False) -> RetentionResult:  # fmt: skip
    """Remove what is older than `days` (default TOOLHUB_RETENTION_DAYS) in batches of `batch_size` turns
    (default TOOLHUB_RETENTION_BATCH); record the run. Dry: count what would go, write nothing."""
    days = settings.TOOLHUB_RETENTION_DAYS if days is None else days
    batch_size = batch_size or settings.TOOLHUB_RETENTION_BATCH
    started_at = timezone.now()
    cutoff = retention_cutoff(days=days, now=now)
    result = RetentionResult(retention_days=days, cutoff=cutoff, dry_run=dry_run)
    if cutoff is None:
        return result
    if dry_run:
        turns = expired_turns(cutoff)
        result.turns = turns.count()
        result.events = TurnEvent.objects.filter(turn__in=turns).count()
        result.messages = Message.objects.filter(turn__in=turns).count() + expired_loose_messages(cutoff).count()
        result.routing_logs = (
            RoutingLog.objects.filter(turn__in=turns).count() + expired_loose_routing_logs(cutoff).count()
        )
        result.conversations = _would_be_emptied(turns, cutoff).count()
        return result
    for batch in (_turn_batch, _loose_messages_batch, _loose_logs_batch):
        while batch(cutoff, batch_size, result):
            pass
    RetentionRun.objects.create(
        started_at=started_at,
        finished_at=timezone.now(),
        retention_days=days,
        cutoff=cutoff,
        **{
            name: getattr(result, name)
            for name in ("batches", "turns", "events", "messages", "routing_logs", "conversations")
        },
    )
    return result


class RetentionStatus(TypedDict):
    days: int
    interval: int  # seconds between runs
    last_run: RetentionRun | None
    summarised_days: int


def retention_status() -> RetentionStatus:
    """The overview's retention section: the setting and the last run."""
    return {
        "days": settings.TOOLHUB_RETENTION_DAYS,
        "interval": settings.TOOLHUB_RETENTION_INTERVAL,
        "last_run": RetentionRun.objects.first(),
        "summarised_days": RetentionDay.objects.count(),
    }
