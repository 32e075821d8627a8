"""The overview breakdown's closed hours: each UTC hour summed once, so a range of days reads a few rows an hour and
only its open edges (the partial hours at its ends, the last minutes, an hour with a turn still running) row by row.

An hour is closed when it ended SETTLE ago (every event of it is committed) and every turn created in it has ended
(its status, tokens and routing log's duration are final then). The first breakdown of a range sums its closable
hours (one grouped query for the turns, one for the tool results, whatever their number) under rollup's lock, which
a concurrent breakdown waits for and then finds them summed. Turns are counted in the hour they were created, tool
results in the hour they were returned, as the row-by-row reading counts them. The sums keep the model profile (its
name read when shown), the channel and the API key name the conversation had; retention removing rows later leaves
them as summed.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Sum, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Greatest, TruncHour
from django.utils import timezone

from agents.models import OverviewHour, OverviewHourTools, OverviewHourTurns, Turn, TurnEvent
from agents.turns import rollup

from .metrics import FAILED_RESULT

SETTLE = datetime.timedelta(minutes=5)
HOUR = datetime.timedelta(hours=1)
WEEK = datetime.timedelta(days=7)  # what the beat task keeps summed (agents.tasks.close_overview_hours)
# A turn's machine time: its routing log's duration less its approval waits (NULL for a log with no duration).
MACHINE_LOG = Greatest(F("routing_log__turn_ms") - Coalesce(F("routing_log__wait_ms"), Value(0)), Value(0))


@dataclass(frozen=True)
class Split:
    """A range cut into its closed hours (read summed) and the spans around them (read row by row), both half-open."""

    closed: list[datetime.datetime]
    open_spans: list[tuple[datetime.datetime, datetime.datetime]]

    def open_filter(self, field: str = "created_at") -> Q:
        """Rows of `field` within the open spans (matches nothing when there are none)."""
        matched = Q(pk__in=[])
        for since, until in self.open_spans:
            matched |= Q(**{f"{field}__gte": since, f"{field}__lt": until})
        return matched


def whole_hours(
    since: datetime.datetime, until: datetime.datetime, *, now: datetime.datetime
) -> list[datetime.datetime]:
    """The UTC hours that lie wholly in [since, until) and ended SETTLE before `now`."""
    first = since.astimezone(datetime.UTC).replace(minute=0, second=0, microsecond=0)
    if first < since:
        first += HOUR
    end = min(until, now - SETTLE)
    hours = []
    while first + HOUR <= end:
        hours.append(first)
        first += HOUR
    return hours


def split(since: datetime.datetime, until: datetime.datetime, *, now: datetime.datetime | None = None) -> Split:
    """[since, until) as its closed hours (summing those not summed yet) and the spans left to read row by row."""
    hours = whole_hours(since, until, now=now or timezone.now())
    closed = sorted(close(hours)) if hours else []
    spans, start = [], since
    for hour in closed:
        if start < hour:
            spans.append((start, hour))
        start = hour + HOUR
    if start < until:
        spans.append((start, until))
    return Split(closed, spans)


def close(hours: Sequence[datetime.datetime]) -> set[datetime.datetime]:
    """Of `hours` (consecutive, oldest first), those summed: already, or now when every turn of theirs has ended."""
    since, until = hours[0], hours[-1] + HOUR
    summed = _summed(since, until)
    missing = [hour for hour in hours if hour not in summed]
    if not missing:
        return summed
    running = set(
        Turn.objects.filter(created_at__gte=missing[0], created_at__lt=missing[-1] + HOUR)
        .exclude(status__in=Turn.ENDED)
        .annotate(hour=TruncHour("created_at", tzinfo=datetime.UTC))
        .values_list("hour", flat=True)
        .distinct()
    )
    closable = [hour for hour in missing if hour not in running]
    if not closable:
        return summed
    try:
        with transaction.atomic():
            rollup.day_lock()
            done = _summed(closable[0], closable[-1] + HOUR)  # another breakdown may have summed some meanwhile
            _sum([hour for hour in closable if hour not in done])
    except IntegrityError:  # SQLite: another process summed one between the check and the insert
        pass
    return _summed(since, until)


def _summed(since: datetime.datetime, until: datetime.datetime) -> set[datetime.datetime]:
    rows = OverviewHour.objects.filter(hour__gte=since, hour__lt=until).values_list("hour", flat=True)
    return {hour.astimezone(datetime.UTC) for hour in rows}


def _sum(hours: list[datetime.datetime]) -> None:
    """Sum `hours` (none summed yet) in two grouped queries over their span, keeping only their own rows."""
    if not hours:
        return
    wanted = set(hours)
    since, until = hours[0], hours[-1] + HOUR
    stored = {hour: OverviewHour(hour=hour) for hour in hours}
    OverviewHour.objects.bulk_create(stored.values())
    turns: Iterable[Mapping[str, Any]] = (
        Turn.objects.filter(created_at__gte=since, created_at__lt=until)
        .order_by()
        .values(
            at=TruncHour("created_at", tzinfo=datetime.UTC),
            profile=F("conversation__model_profile_id"),
            channel=F("conversation__channel"),
            key=F("conversation__api_key_name"),
        )  # fmt: skip
        .annotate(**turn_figures())
    )
    OverviewHourTurns.objects.bulk_create(
        OverviewHourTurns(
            hour=stored[row["at"]],
            profile_id=row["profile"],
            channel=row["channel"],
            api_key_name=row["key"],
            turns=row["turns"],
            failed=row["failed"],
            finished=row["finished"],
            machine_ms=row["machine"] or 0,
            prompt_tokens=row["prompt"] or 0,
            completion_tokens=row["completion"] or 0,
        )  # fmt: skip
        for row in turns
        if row["at"] in wanted
    )
    tools = (
        TurnEvent.objects.filter(type=TurnEvent.Type.TOOL_RESULT, created_at__gte=since, created_at__lt=until)
        .order_by()
        .values(at=TruncHour("created_at", tzinfo=datetime.UTC), tool=KT("payload__tool_name"))
        .annotate(calls=Count("id"), failed=Count("id", filter=FAILED_RESULT))
    )
    OverviewHourTools.objects.bulk_create(
        OverviewHourTools(
            hour=stored[row["at"]], tool=str(row["tool"] or ""), calls=row["calls"], failed=row["failed"]
        )  # fmt: skip
        for row in tools
        if row["at"] in wanted
    )


def turn_figures() -> dict:
    """What a group of turns sums: turns, failed, machine (ms), finished, prompt and completion (tokens of the ended
    ones)."""
    return {
        "turns": Count("id"),
        "failed": Count("id", filter=Q(status=Turn.Status.FAILED)),
        "machine": Sum(MACHINE_LOG),
        "finished": Count("routing_log__turn_ms"),
        "prompt": Sum("prompt_tokens", filter=Q(status__in=Turn.ENDED)),
        "completion": Sum("completion_tokens", filter=Q(status__in=Turn.ENDED)),
    }


SUMMED_TURN_FIELDS = ("turns", "failed", "machine_ms", "finished", "prompt_tokens", "completion_tokens")


def turn_groups(closed: Sequence[datetime.datetime]) -> list[Mapping[str, Any]]:
    """The turns of a split's closed hours grouped by profile name, channel and key, with turn_figures' names (every
    summed hour between its first and last closed one is one of them)."""
    if not closed:
        return []
    rows = (
        OverviewHourTurns.objects.filter(hour__hour__gte=closed[0], hour__hour__lt=closed[-1] + HOUR)
        .order_by()
        .values_list("profile__name", "channel", "api_key_name")
        .annotate(*(Sum(field) for field in SUMMED_TURN_FIELDS))
    )
    names = ("profile", "channel", "key", "turns", "failed", "machine", "finished", "prompt", "completion")
    return [dict(zip(names, row, strict=True)) for row in rows]


def tool_groups(closed: Sequence[datetime.datetime]) -> dict[str, tuple[int, int]]:
    """{tool: (calls, failed)} of a split's closed hours."""
    if not closed:
        return {}
    rows = (
        OverviewHourTools.objects.filter(hour__hour__gte=closed[0], hour__hour__lt=closed[-1] + HOUR)
        .order_by()
        .values_list("tool")
        .annotate(Sum("calls"), Sum("failed"))
    )
    return {tool: (calls, failed) for tool, calls, failed in rows}
