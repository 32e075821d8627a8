"""The overview's live figures and charts, and the console's token budget, from stored rows only."""

import datetime

import pytest
from django.utils import timezone

from agents.console import charts, overview
from agents.console.charts import bar_chart, line_chart, nice_ticks
from agents.console.metrics import live_counters, recent_latencies, tokens_saved_total, turns_per_minute
from agents.models import Conversation, ModelProfile, RoutingLog, ToolApproval, Turn
from agents.turns.budget import token_budget
from agents.turns.routing_log import approval_wait_ms, record_outcome
from catalog.knowledge.registry import knowledge_section
from catalog.models.tokens import count_tokens
from tests.support.builders import make_user

DECISION = {"action": "answer", "domains": [], "confidence": 0.9, "phase": "", "side_query": False}


def routing_log(**fields) -> RoutingLog:
    return RoutingLog.objects.create(query="q", decision=DECISION, **fields)


@pytest.mark.django_db
@pytest.mark.postgres  # GREATEST and SUM in PostgreSQL's SQL
def test_tokens_saved_sums_catalog_minus_loaded_and_listing_never_below_zero_per_request():
    routing_log(catalog_schema_tokens=1000, loaded_schema_tokens=100, deferred_listing_tokens=50)
    routing_log(catalog_schema_tokens=10, loaded_schema_tokens=40)  # loaded more than the catalog: saves 0
    assert tokens_saved_total() == 850


@pytest.mark.django_db
def test_live_counters_come_from_turns_and_the_last_hours_logs():
    conversation = Conversation.objects.create(owner=make_user())
    Turn.objects.create(conversation=conversation, status=Turn.Status.RUNNING)
    Turn.objects.create(conversation=conversation, status=Turn.Status.WAITING)
    old = routing_log(steward_ms=900, turn_ms=9000, fallback=True)
    RoutingLog.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(hours=2))
    for ms in (10, 20, 30):
        routing_log(steward_ms=ms, turn_ms=ms * 10, catalog_schema_tokens=500, loaded_schema_tokens=ms)
    counters = live_counters()
    assert (counters["turns_running"], counters["turns_waiting"], counters["turns_last_minute"]) == (1, 1, 2)
    assert counters["requests_last_hour"] == 3 and counters["fallback_rate"] == 0
    assert (counters["p95_steward_ms"], counters["p95_turn_ms"]) == (30, 300)
    assert counters["saved_per_request"] == 480 and counters["saved_last_request"] == 470
    assert counters["saved_total"] == 1440  # the old log recorded no catalog tokens, so it saved none


def approval(turn: Turn, asked: datetime.datetime, seconds: float | None) -> ToolApproval:
    row = ToolApproval.objects.create(
        turn=turn, tool_call_id=f"c{asked.timestamp()}", tool_name="transfer_points", risk="high", arguments={},
        expires_at=asked + datetime.timedelta(minutes=5),
    )  # fmt: skip
    decided = asked + datetime.timedelta(seconds=seconds) if seconds is not None else None
    ToolApproval.objects.filter(pk=row.pk).update(requested_at=asked, decided_at=decided)
    return row


@pytest.mark.django_db
def test_a_turns_approval_waits_are_counted_once_and_kept_apart_from_its_machine_time():
    turn = Turn.objects.create(conversation=Conversation.objects.create(owner=make_user()), status=Turn.Status.DONE)
    start = timezone.now() - datetime.timedelta(minutes=2)
    approval(turn, start, 10)  # two approvals asked in one step wait together: 0-10 s and 4-12 s are 12 s
    approval(turn, start + datetime.timedelta(seconds=4), 8)
    approval(turn, start + datetime.timedelta(seconds=30), 3)  # a later step's: 3 s more
    assert approval_wait_ms(turn.id) == 15_000
    log = routing_log(turn=turn, steward_ms=20)
    record_outcome(log, called=["transfer_points"], turn_ms=15_400)
    log.refresh_from_db()
    assert (log.turn_ms, log.wait_ms) == (15_400, 15_000)
    routing_log(steward_ms=20, turn_ms=200, wait_ms=0)
    counters = live_counters()
    # 400 and 200 ms of machine time; only the turn that waited counts in the wait's p95.
    assert (counters["p95_turn_ms"], counters["p95_wait_ms"], counters["turns_waited"]) == (400, 15_000, 1)
    assert recent_latencies()["turn"] == [400, 200]  # the chart's turn line is machine time too, oldest first
    live = overview.render_live()
    assert "400 ms</span> p95 turn time, machine only" in live
    assert "15000 ms</span> p95 wait for an approval (1 turn waited" in live
    other = Turn.objects.create(conversation=turn.conversation, status=Turn.Status.WAITING)
    approval(other, timezone.now() - datetime.timedelta(seconds=5), None)  # undecided: counts up to now
    assert 4_900 <= approval_wait_ms(other.id) <= 60_000


@pytest.mark.django_db
def test_turns_per_minute_buckets_the_last_hour_oldest_first():
    conversation = Conversation.objects.create(owner=make_user())
    now = timezone.now()
    for minutes_ago in (0.5, 0.6, 30.5, 90):
        turn = Turn.objects.create(conversation=conversation)
        Turn.objects.filter(pk=turn.pk).update(created_at=now - datetime.timedelta(minutes=minutes_ago))
    counts = turns_per_minute(now=now)
    assert len(counts) == 60 and sum(counts) == 3
    assert counts[-1] == 2 and counts[29] == 1


@pytest.mark.django_db
def test_recent_latencies_are_the_finished_requests_oldest_first():
    logs = [routing_log(steward_ms=ms, turn_ms=ms * 10) for ms in (5, 6, 7)]
    routing_log(steward_ms=1)  # not finished
    latencies = recent_latencies()
    assert (latencies["steward"], latencies["turn"]) == ([5, 6, 7], [50, 60, 70])
    assert latencies["ids"] == [log.pk for log in logs] and latencies["started"] == [log.created_at for log in logs]


@pytest.mark.parametrize(
    "top, ticks",
    [
        (0, [0, 1]),
        (1, [0, 1]),
        (3, [0, 1, 2, 3]),
        (10, [0, 5, 10]),
        (244, [0, 100, 200, 300]),
        (1800, [0, 500, 1000, 1500, 2000]),
    ],
)
def test_the_y_axis_ticks_are_round_numbers_from_zero_to_at_least_the_top(top, ticks):
    assert nice_ticks(top) == ticks


MINUTES = ["12:00", "12:01", "12:02"]


def test_bars_scale_to_the_top_tick_and_each_carries_its_labelled_value():
    chart = bar_chart([0, 5, 10], labels=MINUTES, label="Turns", unit="turn", y_unit="turns per minute",
                      x_title="minute", column="Minute")  # fmt: skip
    points = chart["points"]
    assert [point["height"] for point in points] == [0, 60, 120] and points[2]["y"] == charts.TIP_BAND
    assert [point["text"] for point in points] == ["12:00 · 0 turns", "12:01 · 5 turns", "12:02 · 10 turns"]
    assert [tick["value"] for tick in chart["axes"]["y_ticks"]] == [0, 5, 10]
    assert [tick["label"] for tick in chart["axes"]["x_ticks"]] == MINUTES
    assert chart["table"] == {
        "head": ["Minute", "turns per minute"],
        "rows": [["12:00", 0], ["12:01", 5], ["12:02", 10]],
    }


def test_a_line_chart_point_carries_every_series_value_and_its_key():
    chart = line_chart({"turn": [100, 300], "steward": [10, 20]}, labels=["12:00:01", "12:00:09"], keys=["7", "8"],
                       label="ms", unit="ms", x_title="start", column="Started")  # fmt: skip
    assert chart["lines"][0]["points"] == "250.0,80.0 750.0,0.0" and not chart["empty"]
    assert [point["key"] for point in chart["points"]] == ["7", "8"]
    assert chart["points"][1]["text"] == "12:00:09 · turn 300 ms · steward 20 ms"
    assert chart["table"]["head"] == ["Started", "turn (ms)", "steward (ms)"]
    assert line_chart({"turn": []}, labels=[], keys=[], label="ms", unit="ms", x_title="", column="")["empty"]


def test_the_budget_splits_knowledge_out_of_the_system_prompt_and_leaves_the_rest_free():
    profile = ModelProfile(name="p", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024)
    knowledge = [{"key": "k", "title": "T", "text": "Stores open at nine.", "source": "wiki", "version": 1,
                  "stale": False}]  # fmt: skip
    knowledge_tokens = count_tokens(knowledge_section(knowledge))
    figures = token_budget(profile, system_tokens=300 + knowledge_tokens, tool_tokens=500, knowledge=knowledge,
                           memory_tokens=80)  # fmt: skip
    assert figures["system"] == 300 and figures["knowledge"] == knowledge_tokens
    assert (figures["tools"], figures["memory"], figures["reserve"], figures["window"]) == (500, 80, 2048, 8192)
    assert figures["free"] == 8192 - 300 - knowledge_tokens - 500 - 80 - 2048
