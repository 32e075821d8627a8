"""toolhub's Prometheus metrics, read from the database at each scrape (never kept in a process's memory).

Every figure comes from the rows every process shares (turns, routing logs, approvals, tool events, MCP servers)
plus what retention removed of them (RetentionDay), so a scrape answers the same whichever Daphne the balancer
picks, and no process's restart resets a counter. Counters therefore count since the first turn, retained or not:
turns by outcome, routing requests and fallbacks, schema tokens kept out of prompts; the turn and steward latency
histograms add the stored routing logs' times to RetentionDay's buckets (the same bounds, so nothing is
interpolated). Retention keeps no per-tool figures, so tool calls are a gauge over the last hour rather than a
counter that would drop when old turns are removed. The histograms carry `_count` but no `_sum`: retention keeps
bucket counts only, and a sum over the stored rows alone would be wrong.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

from django.db.models import Count, Q, Sum
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from agents.console.metrics import TOKENS_SAVED, tool_outcomes
from agents.models import RetentionDay, RoutingLog, ToolApproval, Turn
from catalog.models import McpServer

BOUNDS_MS = RetentionDay.LATENCY_BUCKETS_MS
TOOL_CALL_WINDOW = datetime.timedelta(hours=1)
# Tool names come from MCP servers: the most-called tools keep their own series, the rest share tool="other", so a
# catalog of thousands of tools cannot explode the number of series (at most 2 x (TOOL_SERIES + 1)).
TOOL_SERIES = 50
OTHER_TOOLS = "other"


def collect() -> Iterator[Metric]:
    """Every metric family, in a stable order (a `Collector` for prometheus_client's registry)."""
    yield from _turns()
    yield from _routing()
    yield _latency("toolhub_turn_duration_seconds", "Turn time from the steward to the answer.", "turn_ms")
    yield _latency("toolhub_steward_duration_seconds", "The steward's routing time per request.", "steward_ms")
    yield from _approvals()
    yield _tool_calls()
    yield _mcp_servers()


def _turns() -> Iterator[Metric]:
    ended = CounterMetricFamily(
        "toolhub_turns", "Turns that ended, by outcome (retained or removed).", labels=["outcome"]
    )
    stored = dict(Turn.objects.filter(status__in=Turn.ENDED).order_by().values_list("status").annotate(n=Count("id")))
    removed = RetentionDay.objects.aggregate(
        done=Sum("turns_done"), failed=Sum("turns_failed"), cancelled=Sum("turns_cancelled")
    )
    for outcome in Turn.ENDED:
        ended.add_metric([outcome], stored.get(outcome, 0) + (removed[outcome] or 0))
    yield ended
    now = GaugeMetricFamily("toolhub_turns_in_progress", "Turns not ended, by state.", labels=["state"])
    current = dict(Turn.objects.exclude(status__in=Turn.ENDED).order_by().values_list("status").annotate(n=Count("id")))
    for state in (Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING):
        now.add_metric([state], current.get(state, 0))
    yield now


def _routing() -> Iterator[Metric]:
    stored = RoutingLog.objects.aggregate(requests=Count("id"), fallbacks=Count("id", filter=Q(fallback=True)),
                                          saved=Sum(TOKENS_SAVED))  # fmt: skip
    removed = RetentionDay.objects.aggregate(requests=Sum("routing_logs"), fallbacks=Sum("fallbacks"),
                                             saved=Sum("tokens_saved"))  # fmt: skip
    figures = {key: (stored[key] or 0) + (removed[key] or 0) for key in ("requests", "fallbacks", "saved")}
    yield CounterMetricFamily("toolhub_routing_requests", "Requests the steward routed.", value=figures["requests"])
    yield CounterMetricFamily(
        "toolhub_routing_fallbacks", "Routed requests that fell back (the steward could not decide).",
        value=figures["fallbacks"],
    )  # fmt: skip
    yield CounterMetricFamily(
        "toolhub_schema_tokens_saved", "Tool schema tokens kept out of prompts by deferral.", value=figures["saved"]
    )


def _latency(name: str, documentation: str, field: str) -> Metric:
    """A histogram over RoutingLog.<field> (milliseconds) and RetentionDay's buckets of it, in seconds."""
    bounds = {f"le{i}": Count("id", filter=Q(**{f"{field}__lte": top})) for i, top in enumerate(BOUNDS_MS)}
    stored = RoutingLog.objects.filter(**{f"{field}__isnull": False}).aggregate(total=Count("id"), **bounds)
    removed = [0] * (len(BOUNDS_MS) + 1)
    for counts in RetentionDay.objects.values_list(f"{field}_buckets", flat=True):
        for index, count in enumerate(counts or []):
            removed[index] += count
    buckets, below = [], 0
    for index, top in enumerate(BOUNDS_MS):
        below += removed[index]
        buckets.append((_seconds(top), stored[f"le{index}"] + below))
    total = stored["total"] + sum(removed)
    buckets.append(("+Inf", total))
    family = HistogramMetricFamily(name, documentation, buckets=buckets)
    family.add_sample(f"{name}_count", {}, total)  # prometheus_client writes _count only beside a _sum
    return family


def _seconds(milliseconds: int) -> str:
    return f"{milliseconds / 1000:g}"


def _approvals() -> Iterator[Metric]:
    waiting = GaugeMetricFamily("toolhub_approvals", "Stored tool-call approvals, by status.", labels=["status"])
    counts = dict(ToolApproval.objects.order_by().values_list("status").annotate(n=Count("id")))
    for status in ToolApproval.Status.values:
        waiting.add_metric([status], counts.get(status, 0))
    yield waiting


def _tool_calls() -> Metric:
    """Tool results of the last hour by tool and outcome (error: the tool failed or was refused); past the TOOL_SERIES
    most-called tools, the rest are counted together as tool="other"."""
    family = GaugeMetricFamily(
        "toolhub_tool_calls_last_hour", "Tool calls that returned in the last hour, by tool and outcome.",
        labels=["tool", "outcome"],
    )  # fmt: skip
    outcomes = tool_outcomes(since=timezone.now() - TOOL_CALL_WINDOW)
    named = set(sorted(outcomes, key=lambda tool: (-outcomes[tool][0], tool))[:TOOL_SERIES])
    series: dict[tuple[str, str], int] = {}
    for tool, (calls, errors) in outcomes.items():
        label = tool if tool in named else OTHER_TOOLS
        for outcome, count in (("ok", calls - errors), ("error", errors)):
            if count:
                series[(label, outcome)] = series.get((label, outcome), 0) + count
    for (tool, outcome), count in sorted(series.items()):
        family.add_metric([tool, outcome], count)
    return family


def _mcp_servers() -> Metric:
    """1 for an enabled MCP server whose last sync or test succeeded, else 0 (never synced or failed)."""
    family = GaugeMetricFamily(
        "toolhub_mcp_server_up", "An enabled MCP server's last contact succeeded (1) or not (0).", labels=["server"]
    )
    for name, status in McpServer.objects.filter(enabled=True).order_by("name").values_list("name", "status"):
        family.add_metric([name], 1 if status == McpServer.Status.OK else 0)
    return family
