"""The overview's breakdown over a chosen time range: turns by model profile, channel and API key, tool calls by tool,
and the range's latency figures with machine time apart from people's. A few aggregate queries whatever the number
of turns: the range's whole hours that have closed come summed (agents/console/closed_hours.py, summed the first time
a range holds them), the rest (its partial edges, the last minutes, an hour with a turn still running) row by row;
the latency percentiles are read from the range's routing logs.

A range is the last hour, day or week, or a custom span (`from` and `to` as the operator's local date and time,
at most MAX_CUSTOM_DAYS long); anything else is a form error, never a 500.
"""

import datetime
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Aggregate, Count, F, IntegerField, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from agents.models import RoutingLog, Turn, TurnEvent

from . import closed_hours
from .fragments import tool_link
from .metrics import Usage, count_outcomes, priced

RANGES = {
    "hour": ("last hour", datetime.timedelta(hours=1)),
    "day": ("last 24 hours", datetime.timedelta(days=1)),
    "week": ("last 7 days", datetime.timedelta(days=7)),
}
DEFAULT_RANGE = "hour"
DEFAULT_PROFILE = "default profile"  # how a conversation with no profile chosen is named in the tables
MAX_CUSTOM_DAYS = 92
TOP_ROWS = 20  # rows a breakdown table shows; the rest are summed as "others"
MACHINE_MS = Greatest(F("turn_ms") - Coalesce(F("wait_ms"), Value(0)), Value(0))


@dataclass(frozen=True)
class TimeRange:
    key: str  # hour, day, week or custom
    label: str
    since: datetime.datetime
    until: datetime.datetime


def time_range(params, *, now: datetime.datetime | None = None) -> tuple[TimeRange, str]:
    """The range the query string asks for, and an error message ("" when none; the default range is used then)."""
    now = now or timezone.now()
    key = params.get("range", DEFAULT_RANGE)
    if key in RANGES:
        label, span = RANGES[key]
        return TimeRange(key, label, now - span, now), ""
    default = time_range({}, now=now)[0]
    if key != "custom":
        return default, f"Unknown range {key[:40]!r}: showing the {default.label}."
    try:
        since, until = (_local(params.get(name, "")) for name in ("from", "to"))
    except ValueError:
        return default, "A custom range needs a start and an end as a date and time (YYYY-MM-DDTHH:MM)."
    if since >= until:
        return default, "A custom range must start before it ends."
    if until - since > datetime.timedelta(days=MAX_CUSTOM_DAYS):
        return default, f"A custom range may span at most {MAX_CUSTOM_DAYS} days."
    label = f"{timezone.localtime(since):%Y-%m-%d %H:%M} to {timezone.localtime(until):%Y-%m-%d %H:%M}"
    return TimeRange("custom", label, since, until), ""


def _local(text: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(text.strip()[:32])
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def breakdown(span: TimeRange) -> dict:
    """Every figure of the range: totals, machine and approval-wait p95s, and the tables by profile (with tokens and
    cost), channel, key and tool (each at most TOP_ROWS rows, the rest summed as "others"). The closed hours' sums and
    the open spans' turns grouped by profile, channel and key (with their routing logs' machine time), the machine
    times and the waits for the percentiles, the tool results likewise, and the profiles' prices (the tokens come
    with the turns' groups)."""
    parts = closed_hours.split(span.since, span.until)
    open_groups: Iterable[Mapping[str, Any]] = (
        Turn.objects.filter(parts.open_filter())
        .order_by()
        .values(
            profile=F("conversation__model_profile__name"),
            channel=F("conversation__channel"),
            key=F("conversation__api_key_name"),
        )  # fmt: skip
        .annotate(**closed_hours.turn_figures())
    )
    groups = [*closed_hours.turn_groups(parts.closed), *open_groups]
    logs = RoutingLog.objects.filter(created_at__gte=span.since, created_at__lt=span.until, turn_ms__isnull=False)
    latency = _latency(logs)
    turns, failed = sum(group["turns"] for group in groups), sum(group["failed"] for group in groups)
    tokens: dict[str | None, tuple[int, int]] = {}
    for group in groups:  # the tokens of the ended turns, by profile (kept on each turn when it ends)
        before = tokens.get(group["profile"], (0, 0))
        tokens[group["profile"]] = (before[0] + (group["prompt"] or 0), before[1] + (group["completion"] or 0))
    usage = {name or DEFAULT_PROFILE: figures for name, figures in priced(tokens).items()}
    by_profile = _with_costs(_rows(groups, "profile", DEFAULT_PROFILE), usage)
    costs = [figures.cost for figures in usage.values() if figures.cost is not None]
    return {
        "turns": turns,
        "failed": failed,
        "failure_rate": failed / turns if turns else None,
        "p95_machine_ms": latency["p95_machine_ms"],
        "p50_machine_ms": latency["p50_machine_ms"],
        "p95_wait_ms": latency["p95_wait_ms"],
        "turns_waited": latency["waited"],
        "by_profile": by_profile,
        "cost": _money(sum(costs, Decimal(0))) if costs else None,
        "unpriced_profiles": sorted(name for name, figures in usage.items() if figures.cost is None),
        "currency": settings.TOOLHUB_CURRENCY,
        "by_channel": _rows(groups, "channel", "unknown"),
        "by_key": _rows(groups, "key", "no key (console)"),
        "by_tool": _tools(parts),
    }


class _NearestRank(Aggregate):
    """PostgreSQL's ordered-set percentile_disc: the first value whose cumulative share reaches `fraction`, which is
    the nearest-rank percentile (the value at rank ceil(fraction x count))."""

    function = "PERCENTILE_DISC"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = IntegerField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


def _latency(logs) -> dict[str, int | None]:
    """The finished logs' count, those that waited for a person, machine p50/p95 and the wait p95 (None without
    values). PostgreSQL reads them in one scan (percentile_disc); another database counts, then reads each
    percentile at its rank, sorted by the database (never fetched whole)."""
    waited = Q(wait_ms__gt=0)
    if connection.vendor == "postgresql":
        return logs.aggregate(
            finished=Count("id"),
            waited=Count("id", filter=waited),
            p50_machine_ms=_NearestRank(MACHINE_MS, 0.50),
            p95_machine_ms=_NearestRank(MACHINE_MS, 0.95),
            p95_wait_ms=_NearestRank("wait_ms", 0.95, filter=waited),
        )
    counted = logs.aggregate(finished=Count("id"), waited=Count("id", filter=waited))
    machine = logs.annotate(machine=MACHINE_MS).values_list("machine", flat=True)
    waits = logs.filter(waited).values_list("wait_ms", flat=True)
    return counted | {
        "p50_machine_ms": _percentile(machine, "machine", counted["finished"], 0.50),
        "p95_machine_ms": _percentile(machine, "machine", counted["finished"], 0.95),
        "p95_wait_ms": _percentile(waits, "wait_ms", counted["waited"], 0.95),
    }


def _percentile(values, field: str, count: int, fraction: float) -> int | None:
    """The nearest-rank percentile of `count` values, read by the database at its rank."""
    if not count:
        return None
    rank = max(math.ceil(fraction * count) - 1, 0)
    return values.order_by(field)[rank]


def _rows(groups: Iterable[Mapping[str, Any]], field: str, blank: str) -> list[dict]:
    """Turns, failures and the mean machine milliseconds of the finished ones per value of `field`, most turns
    first."""
    rolled: dict[str, dict] = {}
    for group in groups:
        row = rolled.setdefault(group[field] or blank, {"turns": 0, "failed": 0, "machine": 0, "finished": 0})
        for figure in row:
            row[figure] += group[figure] or 0
    rows = [{"name": name, "turns": row["turns"], "failed": row["failed"],
             "mean_machine_ms": round(row["machine"] / row["finished"]) if row["finished"] else None}
            for name, row in sorted(rolled.items(), key=lambda item: (-item[1]["turns"], item[0]))]  # fmt: skip
    return _top(rows, ("turns", "failed"))


def _with_costs(rows: list[dict], usage: Mapping[str, Usage]) -> list[dict]:
    """The profile rows with their tokens in and out, cost and cost per turn (None where the profile has no price);
    the "others" row sums those of the profiles it holds."""
    shown = {row["name"] for row in rows if not row.get("others")}
    for row in rows:
        held = [figures for name, figures in usage.items() if (name not in shown if row.get("others") else
                                                                 name == row["name"])]  # fmt: skip
        costs = [figures.cost for figures in held if figures.cost is not None]
        cost = sum(costs, Decimal(0)) if costs else None
        per_turn = cost / row["turns"] if cost is not None and row["turns"] else None
        row |= {"prompt_tokens": sum(figures.prompt for figures in held),
                "completion_tokens": sum(figures.completion for figures in held),
                "cost": _money(cost) if cost is not None else None,
                "cost_per_turn": _money(per_turn) if per_turn is not None else None}  # fmt: skip
    return rows


def _money(amount: Decimal) -> str:
    """An amount as shown: four decimals below 1, two above (0.0042, 12.50)."""
    return f"{amount:.2f}" if amount >= 1 else f"{amount:.4f}"


def _tools(parts: closed_hours.Split) -> list[dict]:
    outcomes = closed_hours.tool_groups(parts.closed)
    open_results = TurnEvent.objects.filter(parts.open_filter(), type=TurnEvent.Type.TOOL_RESULT)
    for name, (calls, errors) in count_outcomes(open_results).items():
        before = outcomes.get(name, (0, 0))
        outcomes[name] = (before[0] + calls, before[1] + errors)
    rows = [{"name": name, "calls": calls, "failed": errors, "link": tool_link(name)["activity"]}
            for name, (calls, errors) in outcomes.items()]  # fmt: skip
    return _top(sorted(rows, key=lambda row: (-row["calls"], row["name"])), ("calls", "failed"))


def _top(rows: list[dict], summed: tuple[str, ...]) -> list[dict]:
    if len(rows) <= TOP_ROWS:
        return rows
    rest = rows[TOP_ROWS - 1 :]
    others = {"name": f"{len(rest)} others", "others": True, **{key: sum(row[key] for row in rest) for key in summed}}
    return [*rows[: TOP_ROWS - 1], others]
