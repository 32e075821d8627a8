"""A tool's activity (/console/tools/<name>/): calls paired with their results, errors, latency, recent calls."""

import datetime

import pytest
from django.db import connection
from django.utils import timezone

from agents.console.tool_activity import Outcome, tool_activity, tool_event_rows
from agents.models import Conversation, Turn, TurnEvent
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db
NOW = timezone.now()
HOUR = datetime.timedelta(hours=1)


class Events:
    """Tool events of one turn, each stored at a given time (TurnEvent.created_at is set on create)."""

    def __init__(self, owner):
        self.turn = Turn.objects.create(conversation=Conversation.objects.create(owner=owner))
        self.sequence = 0

    def add(self, type, at, **payload) -> TurnEvent:
        self.sequence += 1
        event = TurnEvent.objects.create(turn=self.turn, sequence=self.sequence, type=type, payload=payload)
        TurnEvent.objects.filter(pk=event.pk).update(created_at=at)
        return event

    def call(self, name, at, ms=None, *, error=False, refused=False, client=False, arguments=None) -> TurnEvent:
        """A call of `name` at `at`; its result `ms` later (None: no result)."""
        extra = {"client": True} if client else {}
        event = self.add(TurnEvent.Type.TOOL_CALL, at, tool_name=name, arguments=arguments or {}, **extra)
        if ms is not None:
            self.add(TurnEvent.Type.TOOL_RESULT, at + datetime.timedelta(milliseconds=ms), tool_name=name,
                     is_error=error or refused, refused=refused, content="…")  # fmt: skip
        return event


@pytest.fixture
def owner():
    return make_user("ops", role="operator")


def test_calls_are_paired_with_their_results_for_errors_and_latency(owner):
    first, second, other = Events(owner), Events(owner), Events(owner)
    first.call("calculate", NOW - 50 * datetime.timedelta(minutes=1), 100)
    first.add(TurnEvent.Type.STATUS, NOW - 49 * datetime.timedelta(minutes=1), tool_name="calculate", message="🔧")
    first.call("calculate", NOW - 40 * datetime.timedelta(minutes=1), 300, error=True)
    second.call("calculate", NOW - 30 * datetime.timedelta(minutes=1), 200, refused=True)
    second.call("calculate", NOW - 20 * datetime.timedelta(minutes=1), 50)
    second.call("calculate", NOW - 10 * datetime.timedelta(minutes=1))  # running, or its turn ended first
    other.call("calculate", NOW - 5 * datetime.timedelta(minutes=1), client=True)  # handed to the API client
    other.call("web_search", NOW - 5 * datetime.timedelta(minutes=1), 900)  # another tool
    other.call("calculate", NOW - 3 * HOUR, 5000)  # before the period
    activity = tool_activity("calculate", since=NOW - HOUR, until=NOW)
    assert activity["calls"] == 6 and activity["returned"] == 4
    assert activity["errors"] == 2 and activity["error_rate"] == 0.5
    assert activity["no_result"] == 1 and activity["client"] == 1
    assert activity["p50_ms"] == 100 and activity["p95_ms"] == 300  # nearest rank over 50, 100, 200, 300
    recent = activity["recent"]
    assert [call.outcome for call in recent] == [Outcome.CLIENT, Outcome.NO_RESULT, Outcome.OK, Outcome.ERROR,
                                                 Outcome.ERROR, Outcome.OK]  # fmt: skip
    assert [call.ms for call in recent] == [None, None, 50, 200, 300, 100]
    assert recent[2].link == f"/console/{second.turn.conversation_id}/#turn-{second.turn.pk}"


def test_a_call_started_in_the_period_counts_even_when_its_result_came_after(owner):
    events = Events(owner)
    events.call("calculate", NOW - datetime.timedelta(seconds=1), 2000)
    activity = tool_activity("calculate", since=NOW - HOUR, until=NOW)
    assert activity["calls"] == 1 and activity["p50_ms"] == 2000
    assert tool_activity("calculate", since=NOW - 2 * HOUR, until=NOW - HOUR)["calls"] == 0


def test_no_calls_have_no_latency_and_no_error_rate(owner):
    activity = tool_activity("calculate", since=NOW - HOUR, until=NOW)
    assert activity == {"calls": 0, "returned": 0, "errors": 0, "error_rate": None, "no_result": 0, "client": 0,
                        "p50_ms": None, "p95_ms": None, "recent": []}  # fmt: skip


def test_recent_calls_show_the_newest_with_their_arguments_cut(owner):
    events = Events(owner)
    for i in range(5):
        events.call("calculate", NOW - datetime.timedelta(minutes=10 - i), 10, arguments={"expression": f"{i} + 1"})
    events.call("calculate", NOW - datetime.timedelta(minutes=1), 10, arguments={"expression": "9" * 500})
    recent = tool_activity("calculate", since=NOW - HOUR, until=NOW, recent=3)["recent"]
    assert len(recent) == 3 and recent[1].arguments == '{"expression": "4 + 1"}'
    assert recent[0].arguments.endswith("…") and len(recent[0].arguments) == 201


@pytest.fixture
def calculator():
    tool = make_tool("calculate")
    make_policy(tool)
    return tool


def test_the_page_shows_the_figures_and_links_each_recent_call_to_its_turn(client, owner, calculator):
    events = Events(owner)
    events.call("calculate", NOW - datetime.timedelta(days=2), 40)
    events.call("calculate", NOW - datetime.timedelta(minutes=5), 80, error=True)
    client.force_login(make_user("viewer", role="viewer"))
    day = client.get("/console/tools/calculate/").content.decode()
    assert 'id="activity-calls">1' in day and 'id="activity-errors">1' in day and 'id="activity-p50">80 ms' in day
    assert '<option value="24h" selected>' in day  # the period the figures cover, shown in its select
    assert f'href="/console/{events.turn.conversation_id}/#turn-{events.turn.pk}"' in day
    week = client.get("/console/tools/calculate/", {"window": "7d"}).content.decode()
    assert 'id="activity-calls">2' in week and 'id="activity-p95">80 ms' in week
    assert 'href="/console/search/?tool=calculate"' in week


def test_an_unknown_period_is_a_400_and_an_unknown_tool_a_404(client, calculator):
    client.force_login(make_user("viewer", role="viewer"))
    response = client.get("/console/tools/calculate/", {"window": "1y"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert client.get("/console/tools/no_such_tool/").status_code == 404


def test_the_catalog_page_of_a_tool_links_to_its_activity(client, calculator):
    client.force_login(make_user("viewer", role="viewer"))
    assert 'href="/console/tools/calculate/"' in client.get("/catalog/calculate/").content.decode()


def test_the_activity_needs_the_consoles_permission(client, calculator, django_user_model):
    assert client.get("/console/tools/calculate/").status_code == 302
    client.force_login(django_user_model.objects.create_user("nobody", password="a-long-test-password"))
    assert client.get("/console/tools/calculate/").status_code == 403


def test_the_page_takes_the_same_queries_whatever_the_number_of_calls(client, owner, calculator,
                                                                      django_assert_max_num_queries):  # fmt: skip
    for _ in range(10):
        events = Events(owner)
        for minute in range(5):
            events.call("calculate", NOW - datetime.timedelta(minutes=minute + 1), 10)
    client.force_login(owner)
    # session, user, the user's time zone, permissions (2), the tool, its events, the recent calls' arguments, the
    # header's model and approvals count
    with django_assert_max_num_queries(10):
        page = client.get("/console/tools/calculate/").content.decode()
    assert 'id="activity-calls">50' in page


@pytest.mark.postgres  # migration 0022's index matches the activity's WHERE clause (expression and condition)
def test_the_activity_reads_a_tools_events_through_its_index():
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = tool_event_rows("calculate", since=NOW - HOUR).query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "turn_event_tool_calls" in plan, plan
