"""The overview shows what went wrong in the last hour: failed turns with reasons, turns answered after a tool
failed, and the failing tools, each linking to where it is read in full."""

import datetime

import pytest
from django.utils import timezone

from agents.console.error_summary import recent_errors
from agents.models import Conversation, Turn, TurnEvent
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def ended_turn(conversation, status, *, minutes_ago=5, error="", results=()):
    """A turn that ended `minutes_ago`, with a tool_result event per (tool, failed) in `results`."""
    turn = Turn.objects.create(conversation=conversation, status=status, error=error,
                               finished_at=NOW - datetime.timedelta(minutes=minutes_ago))  # fmt: skip
    for sequence, (tool, failed) in enumerate(results, start=1):
        TurnEvent.objects.create(turn=turn, sequence=sequence, type=TurnEvent.Type.TOOL_RESULT,
                                 payload={"tool_name": tool, "is_error": failed})  # fmt: skip
    return turn


@pytest.fixture
def conversation():
    return Conversation.objects.create(owner=make_user("ops", role="operator"))


def test_the_last_hours_failures_tool_errors_and_failing_tools(conversation):
    ended_turn(conversation, Turn.Status.DONE, results=[("get_member", False)])
    answered_anyway = ended_turn(conversation, Turn.Status.DONE, results=[("get_member", True), ("get_member", False)])
    model_down = ended_turn(conversation, Turn.Status.FAILED, minutes_ago=2, error="model_unavailable: refused")
    ended_turn(conversation, Turn.Status.FAILED, minutes_ago=90, error="too old to count")
    ended_turn(conversation, Turn.Status.CANCELLED, results=[("transfer_points", True)])

    errors = recent_errors()

    assert (errors["ended"], errors["failed"], errors["failure_rate"]) == (4, 1, 0.25)
    assert errors["done_after_tool_error"] == 1 and answered_anyway.status == "done"
    assert [(t["id"], t["error"]) for t in errors["failed_turns"]] == [(model_down.pk, "model_unavailable: refused")]
    assert errors["failed_turns"][0]["link"] == f"/console/{conversation.pk}/#turn-{model_down.pk}"
    failing = [(tool.name, tool.errors, tool.calls) for tool in errors["failing_tools"]]
    assert failing == [("get_member", 1, 3), ("transfer_points", 1, 1)]


def test_the_overview_page_shows_them_with_links(client, conversation):
    failed = ended_turn(conversation, Turn.Status.FAILED, error="turn_timeout: no answer in 300 s")
    ended_turn(conversation, Turn.Status.DONE, results=[("get_member", True)])
    client.force_login(conversation.owner)

    page = client.get("/").content.decode()

    assert "Errors in the last hour" in page
    assert "1</span> failed turn of 2 ended (50 %)" in page
    assert "1</span> turn answered although a tool call failed" in page
    assert f'href="/console/{conversation.pk}/#turn-{failed.pk}">Turn #{failed.pk}</a>' in page
    assert "turn_timeout: no answer in 300 s" in page
    assert 'href="/console/tools/get_member/?window=1h"' in page and "1 of 1 call failed" in page


def test_a_quiet_hour_says_so_without_dividing_by_zero(client, conversation):
    client.force_login(conversation.owner)
    assert "0</span> failed turns of 0 ended (—)" in client.get("/").content.decode()
