"""Closed days summed once for /metrics (MetricsDay), so a scrape reads the open days' rows only, however much
history is kept.

A day (UTC) is closed CLOSED_AFTER_DAYS after it began: its turns have ended and its routing logs are complete
(a turn's deadline is minutes). The first scrape after a day closes sums it: its ended turns by outcome (by the day
they were created, as retention files them) and its routing logs (by the day they were written). Retention moves a
removed row's figures from its MetricsDay to its RetentionDay in the transaction that deletes it
(agents/turns/retention.py), and both take the same lock as the summing (`day_lock`), so a row is counted once:
in RetentionDay when removed, in MetricsDay when summed and kept, or read live while its day is open. /metrics and
the overview's totals (agents/console/metrics.py) read them so.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Count, F, IntegerField, Min, QuerySet, Sum, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from agents.models import MetricsDay, RetentionDay, RoutingLog, Turn

CLOSED_AFTER_DAYS = 2  # today and yesterday are open: read live at each scrape
LOCK_KEY = 7_386_016_421  # pg_advisory_xact_lock's key for summing a day and removing rows (any fixed number)
TURN_FIELDS = ("turns_done", "turns_failed", "turns_cancelled")
LOG_FIELDS = ("routing_logs", "fallbacks", "tokens_saved")
BUCKETS = len(RetentionDay.LATENCY_BUCKETS_MS) + 1
# RoutingLog.tokens_saved in SQL, to sum over many logs at once.
TOKENS_SAVED = Greatest(F("catalog_schema_tokens") - F("loaded_schema_tokens") - F("deferred_listing_tokens"), 0)


def horizon(now: datetime.datetime | None = None) -> datetime.datetime:
    """Where the open days begin (UTC midnight): rows from here on are read live."""
    today = (now or timezone.now()).astimezone(datetime.UTC).date()
    return _midnight(today - datetime.timedelta(days=CLOSED_AFTER_DAYS - 1))


def _midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time.min, tzinfo=datetime.UTC)


def day_lock() -> None:
    """Inside a transaction: wait for any other summing or retention batch (PostgreSQL; SQLite has one writer)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])


@dataclass
class Figures:
    """Counts of some turns and routing logs: what a MetricsDay or a RetentionDay holds (latencies as counts per
    bucket of RetentionDay.LATENCY_BUCKETS_MS)."""

    turns_done: int = 0
    turns_failed: int = 0
    turns_cancelled: int = 0
    routing_logs: int = 0
    fallbacks: int = 0
    tokens_saved: int = 0
    turn_ms: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    steward_ms: list[int] = field(default_factory=lambda: [0] * BUCKETS)

    def add_row(self, row: Sequence[Any]) -> None:
        """Add a values_list row of TURN_FIELDS, LOG_FIELDS and the two bucket lists."""
        for name, value in zip((*TURN_FIELDS, *LOG_FIELDS), row, strict=False):
            setattr(self, name, getattr(self, name) + (value or 0))
        for buckets, counts in ((self.turn_ms, row[-2]), (self.steward_ms, row[-1])):
            for index, count in enumerate(counts or ()):
                buckets[index] += count

    def add_turn(self, status: str) -> None:
        """Count an ended turn by its outcome (one that is neither done nor cancelled failed)."""
        outcomes = {Turn.Status.DONE.value: "turns_done", Turn.Status.CANCELLED.value: "turns_cancelled"}
        outcome = outcomes.get(status, "turns_failed")
        setattr(self, outcome, getattr(self, outcome) + 1)

    def add_log(self, log: RoutingLog) -> None:
        """Count a routing log: its request, fallback, tokens saved and its latencies' buckets."""
        self.routing_logs += 1
        self.fallbacks += log.fallback
        self.tokens_saved += log.tokens_saved
        for buckets, value in ((self.turn_ms, log.turn_ms), (self.steward_ms, log.steward_ms)):
            if value is not None:
                buckets[RetentionDay.bucket_counts([value]).index(1)] += 1


def summed() -> Figures:
    """What retention removed and what the closed days hold, summed (two queries: RetentionDay, MetricsDay)."""
    figures = Figures()
    for model in (RetentionDay, MetricsDay):
        for row in model.objects.values_list(*TURN_FIELDS, *LOG_FIELDS, "turn_ms_buckets", "steward_ms_buckets"):
            figures.add_row(row)
    return figures


def close_days(now: datetime.datetime | None = None) -> int:
    """Sum every closed day not summed yet, oldest first (one a day in use; the first time, every stored one);
    how many were summed."""
    open_from = horizon(now).date()
    last = MetricsDay.objects.order_by("-day").values_list("day", flat=True).first()
    if last is not None:
        first = last + datetime.timedelta(days=1)
    else:
        oldest = [value for value in (Turn.objects.aggregate(at=Min("created_at"))["at"],
                                      RoutingLog.objects.aggregate(at=Min("created_at"))["at"]) if value]  # fmt: skip
        if not oldest:
            return 0
        first = min(oldest).astimezone(datetime.UTC).date()
    day, done = first, 0
    while day < open_from:
        done += _sum_day(day)
        day += datetime.timedelta(days=1)
    return done


def _sum_day(day: datetime.date) -> int:
    since, until = _midnight(day), _midnight(day + datetime.timedelta(days=1))
    try:
        with transaction.atomic():
            day_lock()
            if MetricsDay.objects.filter(day=day).exists():  # another scrape summed it meanwhile
                return 0
            outcomes = dict(
                Turn.objects.filter(created_at__gte=since, created_at__lt=until, status__in=Turn.ENDED)
                .order_by()
                .values_list("status")
                .annotate(n=Count("id"))
            )
            logs = routing_figures(RoutingLog.objects.filter(created_at__gte=since, created_at__lt=until))
            MetricsDay.objects.create(
                day=day,
                turns_done=outcomes.get(Turn.Status.DONE, 0),
                turns_failed=outcomes.get(Turn.Status.FAILED, 0),
                turns_cancelled=outcomes.get(Turn.Status.CANCELLED, 0),
                routing_logs=logs.routing_logs,
                fallbacks=logs.fallbacks,
                tokens_saved=logs.tokens_saved,
                turn_ms_buckets=logs.turn_ms,
                steward_ms_buckets=logs.steward_ms,
            )
    except IntegrityError:  # SQLite: another process summed it between the check and the insert
        return 0
    return 1


def routing_figures(logs: QuerySet[RoutingLog]) -> Figures:
    """Requests, fallbacks, tokens saved and the latency buckets of a RoutingLog queryset, in one grouped query."""
    figures = Figures()
    rows = (
        logs.order_by()
        .annotate(turn_bucket=bucket_index("turn_ms"), steward_bucket=bucket_index("steward_ms"))
        .values_list("turn_bucket", "steward_bucket", "fallback")
        .annotate(n=Count("id"), saved=Sum(TOKENS_SAVED))
    )
    for turn_bucket, steward_bucket, fallback, n, saved in rows:
        figures.routing_logs += n
        figures.fallbacks += n if fallback else 0
        figures.tokens_saved += saved or 0
        for buckets, index in ((figures.turn_ms, turn_bucket), (figures.steward_ms, steward_bucket)):
            if index is not None:
                buckets[index] += n
    return figures


def bucket_index(field: str) -> Case:
    """The index of the latency bucket RoutingLog.<field> falls in (the last one open), None when it is not set."""
    bounds = RetentionDay.LATENCY_BUCKETS_MS
    cases = [When(**{f"{field}__lte": top}, then=Value(index)) for index, top in enumerate(bounds)]
    return Case(*cases, When(**{f"{field}__isnull": False}, then=Value(len(bounds))), default=None,
                output_field=IntegerField())  # fmt: skip


def unsum(removed: Mapping[datetime.date, Figures]) -> None:
    """Inside retention's batch (after day_lock): take removed rows' figures out of the MetricsDay of their day, where
    one holds them (retention adds them to RetentionDay)."""
    for summary in MetricsDay.objects.select_for_update().filter(day__in=list(removed)):
        gone = removed[summary.day]
        for name in (*TURN_FIELDS, *LOG_FIELDS):
            setattr(summary, name, getattr(summary, name) - getattr(gone, name))
        summary.turn_ms_buckets = _minus(summary.turn_ms_buckets, gone.turn_ms)
        summary.steward_ms_buckets = _minus(summary.steward_ms_buckets, gone.steward_ms)
        summary.save()


def _minus(stored: list[int], gone: list[int]) -> list[int]:
    stored = stored or [0] * len(gone)
    return [a - b for a, b in zip(stored, gone, strict=True)]
