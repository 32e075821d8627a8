"""The overview's breakdown over a chosen range: hour, day, week or a custom span; turns by profile, channel and key,
tool calls by tool; machine time apart from approval waits; bad ranges are a 400 showing the default."""

import datetime
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.console import breakdown, closed_hours
from agents.console.breakdown import TOP_ROWS, time_range
from agents.models import (
    Conversation,
    Message,
    ModelProfile,
    OverviewHour,
    OverviewHourTurns,
    RoutingLog,
    Turn,
    TurnEvent,
)
from agents.turns.lifecycle import spent
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
NOW = timezone.now()
DECISION = {"action": "answer", "domains": [], "confidence": 0.9, "phase": "", "side_query": False}


def turn(conversation, *, ago: datetime.timedelta, status=Turn.Status.DONE, turn_ms=None, wait_ms=None) -> Turn:
    row = Turn.objects.create(conversation=conversation, status=status)
    Turn.objects.filter(pk=row.pk).update(created_at=NOW - ago)
    if turn_ms is not None:
        log = RoutingLog.objects.create(turn=row, query="q", decision=DECISION, turn_ms=turn_ms, wait_ms=wait_ms)
        RoutingLog.objects.filter(pk=log.pk).update(created_at=NOW - ago)
    return row


@pytest.fixture
def traffic():
    owner = make_user()
    fast = ModelProfile.objects.create(name="fast", context_window=8192, max_output_tokens=512,
                                       reserved_result_tokens=512)  # fmt: skip
    console = Conversation.objects.create(owner=owner, model_profile=fast)
    api = Conversation.objects.create(owner=owner, channel=Conversation.Channel.API, api_key_name="ci-agent")
    minutes, hours = datetime.timedelta(minutes=1), datetime.timedelta(hours=1)
    turn(console, ago=5 * minutes, turn_ms=300, wait_ms=0)
    turn(console, ago=10 * minutes, turn_ms=20_500, wait_ms=20_000)  # 500 ms of machine time, the rest a person's
    turn(api, ago=20 * minutes, status=Turn.Status.FAILED, turn_ms=100)
    turn(api, ago=5 * hours, turn_ms=700)  # in the day, not the hour
    turn(api, ago=3 * 24 * hours, turn_ms=900)  # in the week only
    first = Turn.objects.order_by("id").first()
    for sequence, (name, failed) in enumerate([("get_member", False), ("get_member", True), ("calculate", False)]):
        TurnEvent.objects.create(turn=first, sequence=10 + sequence, type=TurnEvent.Type.TOOL_RESULT,
                                 payload={"tool_name": name, "is_error": failed})  # fmt: skip
    TurnEvent.objects.update(created_at=NOW - 5 * minutes)


def test_the_hour_counts_its_turns_by_profile_channel_and_key_with_machine_time_apart(traffic):
    figures = breakdown.breakdown(time_range({}, now=NOW)[0])
    assert (figures["turns"], figures["failed"], figures["turns_waited"]) == (3, 1, 1)
    assert (figures["p95_machine_ms"], figures["p95_wait_ms"]) == (500, 20_000)
    assert {row["name"]: (row["turns"], row["failed"]) for row in figures["by_channel"]} == {
        "console": (2, 0),
        "api": (1, 1),
    }
    assert {row["name"]: row["mean_machine_ms"] for row in figures["by_profile"]} == {
        "fast": 400,
        "default profile": 100,
    }
    assert [row["name"] for row in figures["by_key"]] == ["no key (console)", "ci-agent"]
    assert [(row["name"], row["calls"], row["failed"]) for row in figures["by_tool"]] == [
        ("get_member", 2, 1), ("calculate", 1, 0)
    ]  # fmt: skip


@pytest.mark.parametrize("key,turns", [("hour", 3), ("day", 4), ("week", 5)])
def test_each_range_counts_the_turns_within_it(traffic, key, turns):
    span, error = time_range({"range": key}, now=NOW)
    assert error == "" and breakdown.breakdown(span)["turns"] == turns


def test_a_custom_range_is_read_in_the_operators_zone_and_bad_ones_say_why(traffic, settings):
    local = timezone.localtime(NOW)
    params = {"range": "custom", "from": (local - datetime.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M"),
              "to": (local - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")}  # fmt: skip
    span, error = time_range(params, now=NOW)
    assert error == "" and span.key == "custom" and breakdown.breakdown(span)["turns"] == 1
    for bad, said in [
        ({"range": "custom", "from": "yesterday", "to": "2026-01-01T00:00"}, "needs a start and an end"),
        ({"range": "custom", "from": "2026-02-01T00:00", "to": "2026-01-01T00:00"}, "start before it ends"),
        ({"range": "custom", "from": "2025-01-01T00:00", "to": "2026-01-01T00:00"}, "at most 92 days"),
        ({"range": "fortnight"}, "Unknown range"),
        ({"range": "custom", "from": "2026-01-01T00:00\x00", "to": "x" * 10_000}, "needs a start and an end"),
    ]:
        span, error = time_range(bad, now=NOW)
        assert said in error and span.key == "hour"


def test_the_page_shows_the_range_and_answers_400_for_a_bad_one(client, traffic):
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/", {"range": "day"}).content.decode()
    assert (
        "Breakdown: last 24 hours</h2>" in page and '<a href="?range=day#overview-range" aria-current="page">' in page
    )
    assert '<a href="/console/tools/get_member/"><code>get_member</code></a>' in page and "ci-agent" in page
    response = client.get("/", {"range": "custom", "from": "<script>", "to": ""})
    assert response.status_code == 400 and "needs a start and an end" in response.content.decode()
    assert "<script>" not in response.content.decode().split('id="overview-range"')[1]


def test_a_long_tail_is_summed_as_others(monkeypatch):
    rows = [{"name": f"tool_{n:02}", "calls": 1, "failed": n % 2} for n in range(TOP_ROWS + 5)]
    monkeypatch.setattr(breakdown, "count_outcomes", lambda _: {row["name"]: (1, row["failed"]) for row in rows})
    top = breakdown._tools(closed_hours.Split([], [(NOW - datetime.timedelta(hours=1), NOW)]))
    assert len(top) == TOP_ROWS and top[-1] == {"name": "6 others", "others": True, "calls": 6, "failed": 3}


def spend(row: Turn, *, sent: int, wrote: int) -> None:
    """A model call that was sent `sent` tokens (its budget event) and an answer of `wrote` tokens."""
    parts = {"system": sent // 2, "tools": sent - sent // 2, "knowledge": 0, "memory": 0}
    TurnEvent.objects.create(turn=row, sequence=1, type=TurnEvent.Type.ROUTING, phase="budget", payload=parts)
    Message.objects.create(conversation=row.conversation, turn=row, role=Message.Role.ASSISTANT, content="ok",
                           tokens=wrote)  # fmt: skip
    Turn.objects.filter(pk=row.pk).update(**spent())  # what ending it stores (agents/turns/lifecycle.py)


def test_costs_per_profile_and_per_turn_come_from_the_profiles_prices(traffic, settings):
    settings.TOOLHUB_CURRENCY = "EUR"
    fast = ModelProfile.objects.get(name="fast")
    fast.input_price, fast.output_price = Decimal("2.5"), Decimal("10")  # per million tokens
    fast.save()
    first, second = Turn.objects.filter(conversation__model_profile=fast).order_by("id")
    spend(first, sent=120_000, wrote=20_000)  # 0.30 + 0.20
    spend(second, sent=280_000, wrote=0)  # 0.70
    api_turn = Turn.objects.filter(conversation__channel=Conversation.Channel.API).order_by("id").first()
    spend(api_turn, sent=1_000, wrote=10)  # the default profile: no price set
    figures = breakdown.breakdown(time_range({}, now=NOW)[0])
    rows = {row["name"]: row for row in figures["by_profile"]}
    assert (rows["fast"]["prompt_tokens"], rows["fast"]["completion_tokens"]) == (400_000, 20_000)
    assert (rows["fast"]["cost"], rows["fast"]["cost_per_turn"]) == ("1.20", "0.6000")
    assert (rows["default profile"]["cost"], rows["default profile"]["prompt_tokens"]) == (None, 1_000)
    assert figures["cost"] == "1.20" and figures["unpriced_profiles"] == ["default profile"]


def test_the_page_shows_the_cost_and_which_profiles_have_no_price(client, traffic, settings):
    settings.TOOLHUB_CURRENCY = "EUR"
    ModelProfile.objects.filter(name="fast").update(output_price=Decimal("3"))
    spend(Turn.objects.filter(conversation__model_profile__name="fast").first(), sent=10, wrote=1_000_000)
    spend(Turn.objects.filter(conversation__channel=Conversation.Channel.API).order_by("id").first(), sent=5, wrote=5)
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/").content.decode()
    assert "3.00 EUR</span> model cost" in page and "default profile: no price set" in page
    assert "Cost (EUR)" in page and "set prices" not in page  # a viewer may not edit profiles


def percentiles_of_twenty_turns() -> None:
    """Twenty turns of 100 ms to 2,000 ms machine time, every fourth one also waiting 1-5 s for a person."""
    conversation = Conversation.objects.create(owner=make_user())
    for n in range(1, 21):
        wait = 1_000 * (n // 4) if n % 4 == 0 else 0
        turn(conversation, ago=datetime.timedelta(minutes=n), turn_ms=100 * n + wait, wait_ms=wait)
    figures = breakdown.breakdown(time_range({}, now=NOW)[0])
    # Nearest rank: p50 is the 10th of 20 values, p95 the 19th; the waits 1-5 s, p95 the 5th of 5.
    assert (figures["p50_machine_ms"], figures["p95_machine_ms"]) == (1_000, 1_900)
    assert (figures["turns_waited"], figures["p95_wait_ms"]) == (5, 5_000)


def test_the_percentiles_are_the_nearest_rank():
    percentiles_of_twenty_turns()


@pytest.mark.postgres  # PostgreSQL reads them in one scan, with its percentile_disc
def test_the_percentiles_are_the_nearest_rank_on_postgresql_too():
    percentiles_of_twenty_turns()


def test_whole_hours_are_those_wholly_inside_that_ended_a_settling_time_ago():
    at = datetime.datetime(2026, 12, 7, 10, 0, tzinfo=datetime.UTC)
    minute = datetime.timedelta(minutes=1)
    hours = closed_hours.whole_hours(at - 150 * minute, at + 3 * minute, now=at + 3 * minute)
    assert hours == [at - 2 * closed_hours.HOUR]  # 07:30-10:03 at 10:03: 08:00 whole, 09:00 ended only 3 min ago
    assert closed_hours.whole_hours(at, at + closed_hours.HOUR, now=at + 2 * closed_hours.HOUR) == [at]
    assert closed_hours.whole_hours(at + minute, at + closed_hours.HOUR, now=at + 2 * closed_hours.HOUR) == []


def test_closed_hours_are_summed_once_and_read_summed(traffic):
    week = time_range({"range": "week"}, now=NOW)[0]
    before = breakdown.breakdown(week)
    summed = OverviewHourTurns.objects.count()
    assert summed >= 2 and OverviewHour.objects.count() >= 24 * 6  # the turns 5 hours and 3 days ago, empty hours
    assert breakdown.breakdown(week) == before and OverviewHourTurns.objects.count() == summed
    # Read from the sums from now on: rows removed afterwards (as retention does) stay counted.
    Turn.objects.filter(created_at__lt=NOW - datetime.timedelta(hours=4)).delete()
    after = breakdown.breakdown(week)
    assert (after["turns"], after["by_channel"]) == (5, before["by_channel"])
    assert [(row["name"], row["mean_machine_ms"]) for row in after["by_profile"]] == [
        (row["name"], row["mean_machine_ms"]) for row in before["by_profile"]
    ]


def test_an_hour_with_a_running_turn_stays_open_until_it_ends(traffic):
    conversation = Conversation.objects.get(api_key_name="ci-agent")
    running = turn(conversation, ago=datetime.timedelta(hours=30), status=Turn.Status.RUNNING)
    day_and_more = time_range({"range": "week"}, now=NOW)[0]
    assert breakdown.breakdown(day_and_more)["turns"] == 6
    hour = (NOW - datetime.timedelta(hours=30)).astimezone(datetime.UTC).replace(minute=0, second=0, microsecond=0)
    assert not OverviewHour.objects.filter(hour=hour).exists()
    spend(running, sent=1_000, wrote=10)
    Turn.objects.filter(pk=running.pk).update(status=Turn.Status.FAILED)
    figures = breakdown.breakdown(day_and_more)
    assert OverviewHour.objects.filter(hour=hour).exists() and (figures["turns"], figures["failed"]) == (6, 2)
    assert {row["name"]: row["prompt_tokens"] for row in figures["by_profile"]}["default profile"] == 1_000


def test_the_sums_keep_tool_results_and_read_the_profiles_name_when_shown(traffic):
    fast = ModelProfile.objects.get(name="fast")
    old = turn(Conversation.objects.get(model_profile=fast), ago=datetime.timedelta(days=2), turn_ms=100)
    TurnEvent.objects.create(turn=old, sequence=1, type=TurnEvent.Type.TOOL_RESULT,
                             payload={"tool_name": "get_member", "refused": True})  # fmt: skip
    TurnEvent.objects.filter(turn=old).update(created_at=NOW - datetime.timedelta(days=2))
    week = time_range({"range": "week"}, now=NOW)[0]
    breakdown.breakdown(week)
    fast.name = "fast-v2"
    fast.save()
    figures = breakdown.breakdown(week)
    assert {row["name"]: row["turns"] for row in figures["by_profile"]} == {"fast-v2": 3, "default profile": 3}
    assert [(row["name"], row["calls"], row["failed"]) for row in figures["by_tool"]] == [
        ("get_member", 3, 2), ("calculate", 1, 0)
    ]  # fmt: skip


def test_the_beat_task_sums_the_weeks_closed_hours_ahead_of_the_page(traffic):
    from agents.tasks import close_overview_hours

    assert close_overview_hours() >= 24 * 6
    three_days_ago = (NOW - datetime.timedelta(days=3)).astimezone(datetime.UTC).replace(minute=0, second=0,
                                                                                          microsecond=0)  # fmt: skip
    assert OverviewHourTurns.objects.filter(hour__hour=three_days_ago, turns=1, channel="api").exists()
