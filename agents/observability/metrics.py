"""toolhub's Prometheus metrics, read at each scrape from what every process shares (never kept in a process's memory).

Every figure comes from the rows every process shares (turns, routing logs, approvals, tool events, messages, MCP
servers) plus what retention removed of them (RetentionDay), or from the services every process uses: the broker's
turn queue (agents/observability/broker.py) and PostgreSQL's own view of its connections (pg_stat_activity). So a
scrape answers the same whichever Daphne the balancer picks, and no process's restart resets a counter. Counters
therefore count since the first turn, retained or not: turns by outcome, routing requests and fallbacks, schema tokens
kept out of prompts; the turn and steward latency histograms add the stored routing logs' times to RetentionDay's
buckets (the same bounds, so nothing is interpolated). Closed days are summed once (MetricsDay,
agents/turns/rollup.py): a scrape reads the rows of today and yesterday only, whatever the retention.
Retention keeps no per-tool, per-channel, per-approval or per-profile figures, so those are gauges over the last
hour rather than counters that would drop when old turns are removed. The histograms carry `_count` but no `_sum`:
retention keeps bucket counts only, and a sum over the stored rows alone would be wrong.

Label values stay few whatever users and MCP servers send: channels, outcomes, states and decisions are fixed sets;
tool, server and model profile names past the busiest few share the value "other" (TOOL_SERIES, SERVER_SERIES,
PROFILE_SERIES); API key names, users and conversations are never labels. `toolhub_mcp_server_up` has one series per
enabled MCP server, which only administrators add.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db import connection
from django.db.models import (
    Count,
    Q,
    QuerySet,
)
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from agents.console.metrics import FAILED_RESULT, usage_by_profile
from agents.models import (
    Conversation,
    RetentionDay,
    RoutingLog,
    ToolApproval,
    Turn,
    TurnEvent,
    default_profile,
)
from agents.turns import rollup
from catalog.models import McpServer

from . import broker

BOUNDS_MS = RetentionDay.LATENCY_BUCKETS_MS
LAST_HOUR = datetime.timedelta(hours=1)
# Tool names come from MCP servers: the most-called tools keep their own series, the rest share tool="other", and so
# do servers past the SERVER_SERIES most-called (server="" for a tool no MCP server serves: builtin or imported). A
# catalog of thousands of tools on a hundred servers gives at most 2 x (TOOL_SERIES + SERVER_SERIES + 2) series.
TOOL_SERIES = 50
SERVER_SERIES = 20
PROFILE_SERIES = 20  # model profiles (admin-made) past the 20 with the most tokens share profile="other"
OTHER = "other"
# The states PostgreSQL reports for a connection (pg_stat_activity.state), always exported; "unknown" for another
# role's connection, whose state only a role with pg_read_all_stats may read.
CONNECTION_STATES = ("active", "idle", "idle in transaction", "idle in transaction (aborted)")
PROMPT, COMPLETION = "prompt", "completion"
DECISIONS = tuple(status for status in ToolApproval.Status.values if status != ToolApproval.Status.PENDING)


def collect() -> Iterator[Metric]:
    """Every metric family, in a stable order (a `Collector` for prometheus_client's registry)."""
    rollup.close_days()
    since = rollup.horizon()
    kept = rollup.summed()
    yield from _turns(kept, since)
    yield _turns_by_channel()
    yield from _routing(kept, since)
    yield from _approvals()
    yield _tool_calls()
    yield _tokens()
    yield _mcp_servers()
    yield from _turn_queue()
    yield from _database_connections()


def busiest(counts: dict[str, int], limit: int) -> set[str]:
    """The `limit` names with the largest counts (ties by name): those keep a series of their own."""
    return set(sorted(counts, key=lambda name: (-counts[name], name))[:limit])


def _turns(kept: rollup.Figures, since: datetime.datetime) -> Iterator[Metric]:
    """Ended turns: those retention removed and the closed days' (`kept`), and the open days' read now; turns not
    ended, of the open days (a turn's deadline is minutes: none is older)."""
    ended = CounterMetricFamily(
        "toolhub_turns", "Turns that ended, by outcome (retained or removed).", labels=["outcome"]
    )
    stored = dict(Turn.objects.filter(created_at__gte=since).order_by().values_list("status").annotate(n=Count("id")))
    for outcome in Turn.ENDED:
        ended.add_metric([outcome], stored.get(outcome, 0) + getattr(kept, f"turns_{outcome}"))
    yield ended
    now = GaugeMetricFamily("toolhub_turns_in_progress", "Turns not ended, by state.", labels=["state"])
    for state in (Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING):
        now.add_metric([state], stored.get(state, 0))
    yield now


def _turns_by_channel() -> Metric:
    """Turns that ended in the last hour by the door their conversation came through and their outcome."""
    family = GaugeMetricFamily(
        "toolhub_turns_last_hour", "Turns that ended in the last hour, by channel and outcome.",
        labels=["channel", "outcome"],
    )  # fmt: skip
    ended = (
        Turn.objects.filter(status__in=Turn.ENDED, finished_at__gte=timezone.now() - LAST_HOUR)
        .order_by()
        .values_list("conversation__channel", "status")
        .annotate(n=Count("id"))
    )
    counts: Counter[tuple[str, str]] = Counter()
    for channel, outcome, n in ended:
        counts[(channel if channel in Conversation.Channel.values else OTHER, outcome)] += n
    for channel in Conversation.Channel.values:
        for outcome in Turn.ENDED:
            family.add_metric([channel, outcome], counts.pop((channel, outcome), 0))
    for (channel, outcome), n in sorted(counts.items()):
        family.add_metric([channel, outcome], n)
    return family


def _routing(kept: rollup.Figures, since: datetime.datetime) -> Iterator[Metric]:
    """The routing counters and the turn and steward latency histograms: the open days' routing logs in one grouped
    query (by each latency's bucket, RetentionDay's bounds, and by fallback), plus `kept`."""
    live = rollup.routing_figures(RoutingLog.objects.filter(created_at__gte=since))
    yield CounterMetricFamily(
        "toolhub_routing_requests", "Requests the steward routed.", value=live.routing_logs + kept.routing_logs
    )
    yield CounterMetricFamily(
        "toolhub_routing_fallbacks", "Routed requests that fell back (the steward could not decide).",
        value=live.fallbacks + kept.fallbacks,
    )  # fmt: skip
    yield CounterMetricFamily(
        "toolhub_schema_tokens_saved", "Tool schema tokens kept out of prompts by deferral.",
        value=live.tokens_saved + kept.tokens_saved,
    )  # fmt: skip
    turn_ms = [a + b for a, b in zip(live.turn_ms, kept.turn_ms, strict=True)]
    steward_ms = [a + b for a, b in zip(live.steward_ms, kept.steward_ms, strict=True)]
    yield _latency("toolhub_turn_duration_seconds", "Turn time from the steward to the answer.", turn_ms)
    yield _latency("toolhub_steward_duration_seconds", "The steward's routing time per request.", steward_ms)


def _latency(name: str, documentation: str, counts: list[int]) -> Metric:
    """A histogram in seconds from counts per bucket of BOUNDS_MS (milliseconds; the last bucket open)."""
    buckets, below = [], 0
    for index, top in enumerate(BOUNDS_MS):
        below += counts[index]
        buckets.append((_seconds(top), below))
    total = sum(counts)
    buckets.append(("+Inf", total))
    family = HistogramMetricFamily(name, documentation, buckets=buckets)
    family.add_sample(f"{name}_count", {}, total)  # prometheus_client writes _count only beside a _sum
    return family


def _seconds(milliseconds: int) -> str:
    return f"{milliseconds / 1000:g}"


def _approvals() -> Iterator[Metric]:
    """Stored approvals by status, and of them those decided in the last hour, in one query."""
    rows = (
        ToolApproval.objects.order_by()
        .values_list("status")
        .annotate(n=Count("id"), recent=Count("id", filter=Q(decided_at__gte=timezone.now() - LAST_HOUR)))
    )
    counts = {status: (n, recent) for status, n, recent in rows}
    waiting = GaugeMetricFamily("toolhub_approvals", "Stored tool-call approvals, by status.", labels=["status"])
    for status in ToolApproval.Status.values:
        waiting.add_metric([status], counts.get(status, (0, 0))[0])
    yield waiting
    decided = GaugeMetricFamily(
        "toolhub_approvals_decided_last_hour", "Tool-call approvals decided in the last hour, by decision.",
        labels=["decision"],
    )  # fmt: skip
    for decision in DECISIONS:
        decided.add_metric([decision], counts.get(decision, (0, 0))[1])
    yield decided


def _tool_calls() -> Metric:
    """Tool results of the last hour by tool, its MCP server and outcome (error: the tool failed or was refused); past
    the TOOL_SERIES most-called tools the rest are counted together as tool="other", and past the SERVER_SERIES
    most-called servers as server="other"."""
    family = GaugeMetricFamily(
        "toolhub_tool_calls_last_hour", "Tool calls that returned in the last hour, by tool, MCP server and outcome.",
        labels=["tool", "server", "outcome"],
    )  # fmt: skip
    rows = (
        TurnEvent.objects.filter(type=TurnEvent.Type.TOOL_RESULT, created_at__gte=timezone.now() - LAST_HOUR)
        .order_by()
        .values_list(KeyTextTransform("tool_name", "payload"))
        .annotate(calls=Count("id"), errors=Count("id", filter=FAILED_RESULT))
    )
    outcomes = {str(tool or ""): (calls, errors) for tool, calls, errors in database_rows(rows)}
    server_of = servers_of_tools(outcomes)
    tools = busiest({tool: calls for tool, (calls, _errors) in outcomes.items()}, TOOL_SERIES)
    server_calls: Counter[str] = Counter()
    for tool, server in server_of.items():
        server_calls[server] += outcomes[tool][0]
    servers = busiest(server_calls, SERVER_SERIES)
    series: Counter[tuple[str, str, str]] = Counter()
    for tool, (calls, errors) in outcomes.items():
        server = server_of.get(tool, "")
        labels = (tool if tool in tools else OTHER, server if not server or server in servers else OTHER)
        for outcome, count in (("ok", calls - errors), ("error", errors)):
            if count:
                series[(*labels, outcome)] += count
    for (tool, server, outcome), count in sorted(series.items()):
        family.add_metric([tool, server, outcome], count)
    return family


def database_rows(queryset: QuerySet) -> list[tuple]:
    """A values_list queryset's rows as the database driver returns them: without Django's conversion of each value,
    which costs more than the query when a scrape reads thousands of rows (one per tool called in the hour)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def servers_of_tools(tools: Iterable[str]) -> dict[str, str]:
    """{catalog tool name: the MCP server that serves it} for those of `tools` a server serves (an enabled one first,
    as a call is routed), read in one query."""
    wanted = set(tools)
    server_of: dict[str, str] = {}
    for server, names in McpServer.objects.order_by("-enabled", "name").values_list("name", "tool_names"):
        for name in wanted.intersection(names or ()):
            server_of.setdefault(name, server)
    return server_of


def _tokens() -> Metric:
    """Tokens of the turns started in the last hour that ended, by model profile: `prompt`, what each model call was
    sent (the system prompt, tool schemas, knowledge and conversation of each step, as its budget event records them)
    and `completion`, what the model wrote; both toolhub's own count, kept on the turn when it ends."""
    family = GaugeMetricFamily(
        "toolhub_tokens_last_hour", "Tokens of the ended turns started in the last hour, by model profile and kind.",
        labels=["profile", "kind"],
    )  # fmt: skip
    tokens: Counter[tuple[str, str]] = Counter()
    default = ""
    for profile, usage in usage_by_profile(since=timezone.now() - LAST_HOUR).items():
        if not profile:  # a conversation with no profile chosen runs on the default one
            default = default or default_profile().name
        for kind, count in ((PROMPT, usage.prompt), (COMPLETION, usage.completion)):
            if count:
                tokens[(str(profile or default), kind)] += count
    per_profile: Counter[str] = Counter()
    for (profile, _kind), count in tokens.items():
        per_profile[profile] += count
    named = busiest(per_profile, PROFILE_SERIES)
    series: Counter[tuple[str, str]] = Counter()
    for (profile, kind), count in tokens.items():
        series[(profile if profile in named else OTHER, kind)] += count
    for (profile, kind), count in sorted(series.items()):
        family.add_metric([profile, kind], count)
    return family


def _mcp_servers() -> Metric:
    """1 for an enabled MCP server whose last sync or test succeeded, else 0 (never synced or failed)."""
    family = GaugeMetricFamily(
        "toolhub_mcp_server_up", "An enabled MCP server's last contact succeeded (1) or not (0).", labels=["server"]
    )
    for name, status in McpServer.objects.filter(enabled=True).order_by("name").values_list("name", "status"):
        family.add_metric([name], 1 if status == McpServer.Status.OK else 0)
    return family


def _turn_queue() -> Iterator[Metric]:
    """The broker's turn queue (TOOLHUB_CELERY_QUEUE): messages waiting, and whether the broker answered. Nothing
    while turns run in the process that starts them (CELERY_TASK_ALWAYS_EAGER, the embedded default: no broker)."""
    up = GaugeMetricFamily("toolhub_broker_up", "The Celery broker answered the scrape's read of the turn queue (1).")
    waiting = GaugeMetricFamily(
        "toolhub_celery_queue_messages", "Messages waiting in the turn queue (not yet taken by a worker).",
        labels=["queue"],
    )  # fmt: skip
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        depth = broker.queue_depth(queue)
        up.add_metric([], 0 if depth is None else 1)
        if depth is not None:
            waiting.add_metric([queue], depth)
    yield up
    yield waiting


def _database_connections() -> Iterator[Metric]:
    """PostgreSQL's connections to toolhub's database by state, every process's pool and the scrape's own included,
    and the server's limit; nothing on SQLite."""
    by_state = GaugeMetricFamily(
        "toolhub_database_connections", "Connections to toolhub's PostgreSQL database, by state.", labels=["state"]
    )
    limit = GaugeMetricFamily("toolhub_database_connections_max", "PostgreSQL's max_connections (all databases).")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(  # the scrape's own connection is one of them: at least one row
                "SELECT coalesce(state, 'unknown'), count(*), current_setting('max_connections')::integer"
                " FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
                " GROUP BY 1"
            )
            rows = cursor.fetchall()
        states = {state: count for state, count, _maximum in rows}
        for state in CONNECTION_STATES:
            by_state.add_metric([state], states.pop(state, 0))
        for state, count in sorted(states.items()):
            by_state.add_metric([state], count)
        for _state, _count, maximum in rows[:1]:
            limit.add_metric([], maximum)
    yield by_state
    yield limit
