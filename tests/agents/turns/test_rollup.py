"""/metrics' closed days (agents/turns/rollup.py): summed once, then read from MetricsDay instead of their
rows; retention moves a removed row's figures to RetentionDay, so every counter keeps its value through both."""

import datetime

import pytest
from django.test import override_settings
from django.utils import timezone

from agents.models import Conversation, MetricsDay, RoutingLog, Turn
from agents.turns import rollup
from agents.turns.retention import apply_retention
from tests.agents.observability.test_metrics import TOKEN, family, scrape
from tests.support.builders import make_turn, make_user

pytestmark = pytest.mark.django_db
DAY = datetime.timedelta(days=1)
COUNTERS = ("toolhub_turns_total", "toolhub_routing_requests_total", "toolhub_routing_fallbacks_total",
            "toolhub_schema_tokens_saved_total", "toolhub_turn_duration_seconds_bucket",
            "toolhub_steward_duration_seconds_bucket")  # fmt: skip


def counters(figures: dict) -> dict:
    return {name: family(figures, name) for name in COUNTERS}


@pytest.fixture
def history():
    """Turns over the last 40 days: some removed by retention, some in closed days, some in the open ones."""
    conversation = Conversation.objects.create(owner=make_user())
    now = timezone.now()
    for days_ago, status, turn_ms in [(40, Turn.Status.DONE, 40), (35, Turn.Status.FAILED, 3000),
                                      (10, Turn.Status.DONE, 700), (10, Turn.Status.CANCELLED, 90),
                                      (3, Turn.Status.DONE, 20_000), (0, Turn.Status.DONE, 300)]:  # fmt: skip
        make_turn(conversation, status=status, when=now - days_ago * DAY, turn_ms=turn_ms)
    make_turn(conversation, status=Turn.Status.RUNNING, when=now, turn_ms=None)
    return conversation


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_closed_days_are_summed_once_and_no_counter_moves(client, history):
    expected = {"toolhub_turns_total": {(("outcome", "done"),): 4, (("outcome", "failed"),): 1,
                                        (("outcome", "cancelled"),): 1}}  # fmt: skip
    first = scrape(client)
    summed_days = set(MetricsDay.objects.values_list("day", flat=True))
    today = timezone.now().astimezone(datetime.UTC).date()
    assert min(summed_days) == today - 40 * DAY and max(summed_days) == today - 2 * DAY  # every closed day, once
    assert len(summed_days) == 39
    assert family(first, "toolhub_turns_total") == expected["toolhub_turns_total"]
    assert first[("toolhub_routing_requests_total", ())] == 7
    again = scrape(client)
    assert MetricsDay.objects.count() == 39 and counters(again) == counters(first)


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_a_closed_day_is_read_from_its_sum_not_its_rows(client, history):
    before = scrape(client)
    # Rows of a closed day changed behind retention's back (a late write): the day stays as it was summed.
    RoutingLog.objects.filter(created_at__lt=rollup.horizon()).update(turn_ms=1, fallback=True)
    assert counters(scrape(client)) == counters(before)
    # The open days are read live.
    RoutingLog.objects.filter(created_at__gte=rollup.horizon(), turn__status=Turn.Status.DONE).update(fallback=True)
    assert (
        scrape(client)[("toolhub_routing_fallbacks_total", ())] == before[("toolhub_routing_fallbacks_total", ())] + 1
    )


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_retention_moves_removed_rows_from_the_summed_days_without_counting_twice(client, history):
    before = scrape(client)
    apply_retention(days=30)  # the 40- and 35-day-old turns, summed already
    assert Turn.objects.count() == 5
    assert counters(scrape(client)) == counters(before)
    apply_retention(days=5)  # and those of 10 days ago
    assert Turn.objects.count() == 3
    assert counters(scrape(client)) == counters(before)
    removed = MetricsDay.objects.get(day=timezone.now().astimezone(datetime.UTC).date() - 10 * DAY)
    assert (removed.turns_done, removed.turns_cancelled, removed.routing_logs) == (0, 0, 0)


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_a_value_set_after_its_day_was_summed_leaves_the_counters_as_summed_when_removed(client, history):
    before = scrape(client)
    old = RoutingLog.objects.filter(created_at__lt=timezone.now() - 30 * DAY)
    old.update(turn_ms=None)  # the 40-day-old turn's time went (summed with 40 ms)
    apply_retention(days=30)
    after = scrape(client)
    assert counters(after) == counters(before)
    assert min(sum(day.turn_ms_buckets) for day in MetricsDay.objects.all()) >= -1  # a day may hold -1, never the sum


@pytest.mark.postgres  # the summing and retention under PostgreSQL's advisory lock (rollup.day_lock)
@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_on_postgresql_too(client, history):
    test_retention_moves_removed_rows_from_the_summed_days_without_counting_twice(client, history)
