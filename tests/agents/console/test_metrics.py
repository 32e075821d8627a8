"""Routing metrics come from stored RoutingLogs: precision/recall, fallback rate, stages, latency."""

import datetime
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from agents.console.metrics import DEFAULT_QUALITY_WINDOW, percentile, quality_window, routing_metrics
from agents.models import RoutingLog
from agents.router import analyze
from agents.turns.routing_log import record_analysis, record_outcome

pytestmark = pytest.mark.django_db


def log(recommended, called, *, fallback=False, two_stage=True, steward_ms=10, turn_ms=100):
    return RoutingLog.objects.create(
        query="q", decision={}, recommended=recommended, called=called, fallback=fallback,
        two_stage=two_stage, steward_ms=steward_ms, turn_ms=turn_ms,
    )  # fmt: skip


def test_percentile_is_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([5, 1, 3, 2, 4], 0.5) == 3
    assert percentile(list(range(1, 101)), 0.95) == 95


def test_precision_recall_fallback_and_stages():
    log(["a", "b"], ["a"], steward_ms=10)
    log(["c"], ["c", "d"], fallback=True, steward_ms=30)
    log([], [], two_stage=False, steward_ms=20)
    log(["x"], [], turn_ms=None, steward_ms=40)  # turn not finished: not in precision/recall
    metrics = routing_metrics()
    assert metrics["analyses"] == 4 and metrics["finished_turns"] == 3
    assert metrics["precision"] == 2 / 3
    assert metrics["recall"] == 2 / 3
    assert metrics["fallback_rate"] == 0.25
    assert (metrics["two_stage"], metrics["single_stage"]) == (3, 1)
    assert (metrics["p50_analysis_ms"], metrics["p95_analysis_ms"]) == (20, 40)


def test_precision_and_recall_per_stage_count_finished_turns_only():
    log(["a", "b"], ["a"])  # two-stage: 1 hit of 2 recommended, 1 called
    log(["c"], ["c", "d"], fallback=True)  # two-stage: 1 hit of 1 recommended, 2 called
    log(["x", "y"], ["z"], turn_ms=None)  # two-stage, not finished: counted as an analysis only
    log(["e"], ["e", "e"], two_stage=False)  # single-stage: a repeated call counts once
    log(["f"], ["g"], two_stage=False)
    stages = routing_metrics()["stages"]
    assert stages["two_stage"] == {"analyses": 3, "finished_turns": 2, "precision": 2 / 3, "recall": 2 / 3}
    assert stages["single_stage"] == {"analyses": 2, "finished_turns": 2, "precision": 1 / 2, "recall": 1 / 2}


def test_a_stage_without_finished_turns_has_no_precision_or_recall_rather_than_zero():
    log(["a"], ["a"], two_stage=False, turn_ms=None)
    log([], ["b"])  # finished, nothing recommended: precision undefined, recall 0
    metrics = routing_metrics()
    assert metrics["stages"]["single_stage"] == {"analyses": 1, "finished_turns": 0, "precision": None, "recall": None}
    assert (metrics["stages"]["two_stage"]["precision"], metrics["stages"]["two_stage"]["recall"]) == (None, 0)
    empty = routing_metrics(until=timezone.now() - datetime.timedelta(days=2))
    assert (empty["analyses"], empty["precision"], empty["fallback_rate"]) == (0, None, None)
    assert empty["stages"]["two_stage"]["recall"] is None


def test_an_unknown_quality_window_is_the_default():
    assert quality_window("7d").span == datetime.timedelta(days=7)
    assert quality_window("forever") == quality_window(None) == DEFAULT_QUALITY_WINDOW
    assert DEFAULT_QUALITY_WINDOW.span == datetime.timedelta(hours=24)


def test_window_excludes_older_logs():
    old = log(["a"], ["a"])
    RoutingLog.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(days=3))
    assert routing_metrics()["analyses"] == 0
    assert routing_metrics(since=timezone.now() - datetime.timedelta(days=4))["analyses"] == 1


def test_recorded_analysis_then_outcome_feeds_the_metrics(demo_catalog):
    result = analyze("What is 15 + 27?")
    entry = record_analysis(result, query="What is 15 + 27?")
    record_outcome(entry, called=["calculate", "calculate"], turn_ms=42)
    entry.refresh_from_db()
    assert entry.recommended == ["calculate"] and entry.called == ["calculate"]
    assert entry.decision["action"] and entry.steward_mode == "rules"
    metrics = routing_metrics()
    assert (metrics["precision"], metrics["recall"]) == (1.0, 1.0)


def test_steward_analyze_prints_one_line_per_query_and_a_summary(tmp_path, capsys, demo_catalog):
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps({"id": "a", "query": "What is 15 + 27?"}) + "\n\n"
        + json.dumps({"id": "b", "query": "Tạo chiến dịch mới"}) + "\n"
    )  # fmt: skip
    call_command("steward_analyze", queries=str(queries))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line.get("id") for line in lines[:2]] == ["a", "b"]
    assert lines[0]["recommended_tools"] == ["calculate"] and lines[1]["action"] == "create"
    assert lines[2]["count"] == 2 and lines[2]["p95_ms"] >= lines[2]["p50_ms"] > 0
    assert RoutingLog.objects.count() == 2


def test_steward_analyze_names_the_bad_line(tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "a", "query": "ok"}) + "\n{broken\n")
    with pytest.raises(CommandError, match=r"q.jsonl, line 2: not valid JSON"):
        call_command("steward_analyze", queries=str(queries))
    queries.write_text(json.dumps({"query": "no id"}) + "\n")
    with pytest.raises(CommandError, match=r"q.jsonl, line 1: expected an object"):
        call_command("steward_analyze", queries=str(queries))
