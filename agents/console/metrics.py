"""Routing and overview metrics over a time window, computed from RoutingLogs and Turns (never from memory).

Recommendation precision/recall compare what the steward recommended with
what the model then called, over finished turns only (turn_ms set).
"""

import datetime
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.utils import timezone

from agents.models import ModelProfile, RoutingLog, Turn, TurnEvent, default_profile
from agents.turns import rollup
from agents.turns.rollup import TOKENS_SAVED


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


@dataclass(frozen=True)
class MetricsWindow:
    """A span the routing page offers for its recommendation-quality figures; `key` is its query-string value."""

    key: str
    label: str
    span: datetime.timedelta


QUALITY_WINDOWS = (
    MetricsWindow("1h", "last hour", datetime.timedelta(hours=1)),
    MetricsWindow("24h", "last 24 hours", datetime.timedelta(hours=24)),
    MetricsWindow("7d", "last 7 days", datetime.timedelta(days=7)),
    MetricsWindow("30d", "last 30 days", datetime.timedelta(days=30)),
)
DEFAULT_QUALITY_WINDOW = QUALITY_WINDOWS[1]


def quality_window(key: str | None) -> MetricsWindow:
    """The window named `key`; the default (24 hours) for a missing or unknown key."""
    return next((window for window in QUALITY_WINDOWS if window.key == key), DEFAULT_QUALITY_WINDOW)


def recommendation_quality(logs: list[RoutingLog]) -> dict:
    """Analyses, finished turns, precision and recall of `logs`; precision/recall None when nothing to divide."""
    finished = [log for log in logs if log.turn_ms is not None]
    hits = sum(len(set(log.recommended) & set(log.called)) for log in finished)
    recommended = sum(len(set(log.recommended)) for log in finished)
    called = sum(len(set(log.called)) for log in finished)
    return {
        "analyses": len(logs),
        "finished_turns": len(finished),
        "precision": hits / recommended if recommended else None,
        "recall": hits / called if called else None,
    }


def routing_metrics(*, since: datetime.datetime | None = None, until: datetime.datetime | None = None) -> dict:
    """Figures over [since, until) (default: the 24 hours before now); `stages` splits quality by two_stage."""
    until = until or timezone.now()
    since = since or until - datetime.timedelta(hours=24)
    logs = list(
        RoutingLog.objects.filter(created_at__gte=since, created_at__lt=until).only(
            "recommended", "called", "fallback", "two_stage", "steward_ms", "turn_ms"
        )
    )
    latencies = [log.steward_ms for log in logs if log.steward_ms is not None]
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        **recommendation_quality(logs),
        "fallback_rate": sum(log.fallback for log in logs) / len(logs) if logs else None,
        "two_stage": sum(log.two_stage for log in logs),
        "single_stage": sum(not log.two_stage for log in logs),
        "stages": {
            "two_stage": recommendation_quality([log for log in logs if log.two_stage]),
            "single_stage": recommendation_quality([log for log in logs if not log.two_stage]),
        },
        "p50_analysis_ms": percentile(latencies, 0.50),
        "p95_analysis_ms": percentile(latencies, 0.95),
    }


FAILED_RESULT = Q(payload__is_error=True) | Q(payload__refused=True)  # a tool result that failed or was refused
PER_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Usage:
    """Tokens of some turns of one model profile, and what they cost at its prices (None: the profile has none)."""

    prompt: int
    completion: int
    cost: Decimal | None


def usage_by_profile(*, since: datetime.datetime, until: datetime.datetime | None = None) -> dict[str | None, Usage]:
    """{model profile name (None: the default profile, no profile chosen): tokens and cost} of the turns created in
    [since, until) that ended: the prompt is what their model calls were sent, the completion what the model wrote
    (Turn.prompt_tokens and completion_tokens, set when a turn ends: agents/turns/lifecycle.py `spent`); one grouped
    query and one of the prices."""
    turns = Turn.objects.filter(created_at__gte=since, status__in=Turn.ENDED)
    if until is not None:
        turns = turns.filter(created_at__lt=until)
    rows = list(
        turns.order_by()
        .values_list("conversation__model_profile__name")
        .annotate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    )
    return priced({name: (tokens_in or 0, tokens_out or 0) for name, tokens_in, tokens_out in rows})


def priced(tokens: Mapping[str | None, tuple[int, int]]) -> dict[str | None, Usage]:
    """{profile name (None: the default profile): Usage} of {profile name: (prompt, completion tokens)}, costed at
    each profile's prices (one query; None where a profile has none)."""
    prices = {name: (inp, out) for name, inp, out in
              ModelProfile.objects.filter(name__in=[name for name in tokens if name])
              .values_list("name", "input_price", "output_price")}  # fmt: skip
    if None in tokens:
        fallback = default_profile()
        prices[None] = (fallback.input_price, fallback.output_price)
    usage = {}
    for name, (tokens_in, tokens_out) in tokens.items():
        price_in, price_out = prices.get(name, (None, None))
        cost = None
        if price_in is not None or price_out is not None:
            cost = (tokens_in * (price_in or 0) + tokens_out * (price_out or 0)) / PER_MILLION
        usage[name] = Usage(tokens_in, tokens_out, cost)
    return usage


def tool_outcomes(*, since: datetime.datetime, until: datetime.datetime | None = None) -> dict[str, tuple[int, int]]:
    """{tool name: (calls that returned, of them failed or refused)} over [since, until], in one query."""
    results = TurnEvent.objects.filter(type=TurnEvent.Type.TOOL_RESULT, created_at__gte=since)
    if until is not None:
        results = results.filter(created_at__lte=until)
    return count_outcomes(results)


def count_outcomes(results: QuerySet[TurnEvent]) -> dict[str, tuple[int, int]]:
    """{tool name: (results, of them failed or refused)} of some tool-result events, in one grouped query."""
    rows = (
        results.order_by()
        .values(tool=KT("payload__tool_name"))  # as text: grouping by text is cheaper than by a JSON value
        .annotate(calls=Count("id"), errors=Count("id", filter=FAILED_RESULT))
    )
    return {str(row["tool"] or ""): (row["calls"], row["errors"]) for row in rows}


def tokens_saved_total() -> int:
    """Schema tokens kept out of prompts by deferral over every logged request: the open days' logs summed, and the
    closed days' and removed ones' sums (agents/turns/rollup.py: never a scan of all history)."""
    rollup.close_days()
    live = RoutingLog.objects.filter(created_at__gte=rollup.horizon()).aggregate(total=Sum(TOKENS_SAVED))["total"]
    return (live or 0) + rollup.summed().tokens_saved


def turns_total() -> int:
    """Every turn: those of the open days, and the ended ones of the closed days and of retention's (a turn of a
    closed day that never ended, past every deadline, is not counted)."""
    rollup.close_days()
    kept = rollup.summed()
    return (
        Turn.objects.filter(created_at__gte=rollup.horizon()).count()
        + kept.turns_done
        + kept.turns_failed
        + (kept.turns_cancelled)
    )


def live_counters(*, now: datetime.datetime | None = None) -> dict:
    """The overview's counters: turns now, the last minute, and the last hour's routing logs."""
    now = now or timezone.now()
    hour_ago = now - datetime.timedelta(hours=1)
    logs = list(
        RoutingLog.objects.filter(created_at__gte=hour_ago).only(
            "fallback",
            "steward_ms",
            "turn_ms",
            "wait_ms",
            "catalog_schema_tokens",
            "loaded_schema_tokens",
            "deferred_listing_tokens",
            "created_at",
        )  # fmt: skip
    )
    saved = [log.tokens_saved for log in logs]
    latest = RoutingLog.objects.only(
        "catalog_schema_tokens", "loaded_schema_tokens", "deferred_listing_tokens"
    ).first()  # fmt: skip
    return {
        "turns_running": Turn.objects.filter(status=Turn.Status.RUNNING).count(),
        "turns_waiting": Turn.objects.filter(status=Turn.Status.WAITING).count(),
        "turns_last_minute": Turn.objects.filter(created_at__gte=now - datetime.timedelta(minutes=1)).count(),
        "requests_last_hour": len(logs),
        "fallback_rate": sum(log.fallback for log in logs) / len(logs) if logs else None,
        "p95_steward_ms": percentile([log.steward_ms for log in logs if log.steward_ms is not None], 0.95),
        # Machine time and people's time apart: a turn's approval waits are an operator's, not toolhub's latency.
        "p95_turn_ms": percentile(
            [machine_ms(log.turn_ms, log.wait_ms) for log in logs if log.turn_ms is not None], 0.95
        ),  # fmt: skip
        "p95_wait_ms": percentile(waits := [log.wait_ms for log in logs if log.wait_ms], 0.95),
        "turns_waited": len(waits),
        "saved_last_request": latest.tokens_saved if latest else None,
        "saved_per_request": round(sum(saved) / len(saved)) if saved else None,
        "saved_total": tokens_saved_total(),
    }


def machine_ms(turn_ms: int, wait_ms: int | None) -> int:
    """A turn's own time: its milliseconds less those it waited for people (RoutingLog.wait_ms)."""
    return max(turn_ms - (wait_ms or 0), 0)


def turns_per_minute(*, now: datetime.datetime | None = None, minutes: int = 60) -> list[int]:
    """Turns created in each of the last `minutes` minutes, oldest first."""
    now = now or timezone.now()
    start = now - datetime.timedelta(minutes=minutes)
    counts = [0] * minutes
    for created in Turn.objects.filter(created_at__gt=start, created_at__lte=now).values_list("created_at", flat=True):
        counts[min(int((created - start).total_seconds() // 60), minutes - 1)] += 1
    return counts


def recent_latencies(*, limit: int = 60) -> dict[str, list]:
    """Steward and turn (machine: approval waits left out) milliseconds of the last `limit` finished requests, oldest
    first, with each one's start (`started`) and routing log id (`ids`)."""
    logs = list(
        RoutingLog.objects.filter(turn_ms__isnull=False).values_list(
            "pk", "created_at", "steward_ms", "turn_ms", "wait_ms"
        )[:limit]
    )[::-1]
    return {"steward": [steward or 0 for _, _, steward, _, _ in logs],
            "turn": [machine_ms(turn, wait) for _, _, _, turn, wait in logs],
            "started": [created for _, created, _, _, _ in logs], "ids": [pk for pk, _, _, _, _ in logs]}  # fmt: skip


def recent_requests(*, limit: int = 10) -> list[RoutingLog]:
    """The overview's latest routing logs, newest first, with only the columns it shows."""
    return list(RoutingLog.objects.only("query", "fallback", "loaded_schema_tokens", "created_at")[:limit])
