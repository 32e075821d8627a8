"""The overview's live section: counters, recent requests and inline SVG charts from agents.console.metrics; rendering
only, never writes."""

import datetime

from django.template.loader import render_to_string
from django.utils import timezone

from .charts import bar_chart, line_chart
from .error_summary import recent_errors
from .metrics import live_counters, recent_latencies, recent_requests, turns_per_minute, turns_total

TEMPLATE = "agents/overview.html"
MINUTES = 60


def live_context(*, now: datetime.datetime | None = None) -> dict:
    now = now or timezone.now()
    latencies = recent_latencies()
    # A bucket is named by the minute it ends in (the last one is now's), in the server's time zone.
    minutes = [timezone.localtime(now - datetime.timedelta(minutes=MINUTES - 1 - index)) for index in range(MINUTES)]
    return {
        "counters": live_counters(now=now),
        "errors": recent_errors(now=now),
        "turns_total": turns_total(),
        "routing_logs": recent_requests(),
        "turns_chart": bar_chart(
            turns_per_minute(now=now, minutes=MINUTES),
            labels=[minute.strftime("%H:%M") for minute in minutes],
            label="Turns per minute over the last hour",
            unit="turn",
            y_unit="turns per minute",
            x_title=f"minute ({timezone.get_current_timezone_name()})",
            column="Minute",
        ),
        "latency_chart": line_chart(
            {"turn": latencies["turn"], "steward": latencies["steward"]},
            labels=[timezone.localtime(started).strftime("%H:%M:%S") for started in latencies["started"]],
            keys=[str(pk) for pk in latencies["ids"]],
            label="Turn (machine: approval waits left out) and steward milliseconds of the last 60 requests",
            unit="ms",
            x_title=f"request start, oldest to latest ({timezone.get_current_timezone_name()})",
            column="Started",
        ),
    }


def render_live() -> str:
    """The fragment the overview consumer sends on connect and after changes (replaces #overview-live)."""
    return render_to_string(f"{TEMPLATE}#live", live_context())
