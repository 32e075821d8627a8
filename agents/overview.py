"""The overview's live section: counters and inline SVG charts from agents.metrics; rendering only, never writes."""

from django.template.loader import render_to_string

from .charts import bar_chart, line_chart
from .metrics import live_counters, recent_latencies, recent_requests, turns_per_minute, turns_total

TEMPLATE = "agents/overview.html"


def live_context() -> dict:
    latencies = recent_latencies()
    return {
        "counters": live_counters(),
        "turns_total": turns_total(),
        "routing_logs": recent_requests(),
        "turns_chart": bar_chart(turns_per_minute(), label="Turns per minute over the last hour"),
        "latency_chart": line_chart(
            {"turn": latencies["turn"], "steward": latencies["steward"]},
            label="Turn and steward milliseconds of the last 60 requests",
        ),
    }


def render_live() -> str:
    """The fragment the overview consumer sends on connect and after changes (replaces #overview-live)."""
    return render_to_string(f"{TEMPLATE}#live", live_context())
