"""Routing metrics over a time window, computed from RoutingLogs (never from memory).

Recommendation precision/recall compare what the steward recommended with
what the model then called, over finished turns only (turn_ms set).
"""

import datetime
import math

from django.utils import timezone

from .models import RoutingLog


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


def routing_metrics(*, since: datetime.datetime | None = None, until: datetime.datetime | None = None) -> dict:
    until = until or timezone.now()
    since = since or until - datetime.timedelta(hours=24)
    logs = list(
        RoutingLog.objects.filter(created_at__gte=since, created_at__lt=until).only(
            "recommended", "called", "fallback", "two_stage", "steward_ms", "turn_ms"
        )
    )
    finished = [log for log in logs if log.turn_ms is not None]
    hits = sum(len(set(log.recommended) & set(log.called)) for log in finished)
    recommended = sum(len(set(log.recommended)) for log in finished)
    called = sum(len(set(log.called)) for log in finished)
    latencies = [log.steward_ms for log in logs if log.steward_ms is not None]
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "analyses": len(logs),
        "finished_turns": len(finished),
        "precision": hits / recommended if recommended else None,
        "recall": hits / called if called else None,
        "fallback_rate": sum(log.fallback for log in logs) / len(logs) if logs else None,
        "two_stage": sum(log.two_stage for log in logs),
        "single_stage": sum(not log.two_stage for log in logs),
        "p50_analysis_ms": percentile(latencies, 0.50),
        "p95_analysis_ms": percentile(latencies, 0.95),
    }
