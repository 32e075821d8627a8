"""A turn's timeline from its stored events: each step of the request path with its milliseconds and tokens."""

import datetime

import pytest

from agents.console.fragments import render_event, timeline_of, turn_views
from agents.console.timeline import turn_timeline
from agents.models import Conversation, TurnEvent
from agents.turns import runtime
from agents.turns.events import stored_events
from agents.turns.start import create_turn
from catalog.models.tokens import count_tokens
from tests.support.builders import make_user

START = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


def event(ms: int, type: str, phase: str = "", **payload) -> dict:
    return {
        "type": type,
        "phase": phase,
        "payload": payload,
        "created_at": (START + datetime.timedelta(milliseconds=ms)).isoformat(),
    }


def rows(timeline) -> list[tuple]:
    return [(step["label"], step["start_ms"], step["ms"], step["tokens"]) for step in timeline["steps"]]


def test_each_step_lasts_from_the_event_that_starts_it_to_the_one_that_ends_it():
    events = [
        event(0, "status", "analysis"),
        event(40, "status", "analysis_complete"),
        event(55, "routing", "routing", loaded_schema_tokens=300),
        event(60, "routing", "knowledge", snippets=[{"key": "k", "version": 1}]),
        event(70, "routing", "budget", system=100, tools=300, knowledge=20, memory=80, reserve=500),
        event(200, "status", "tool_execution", tool_name="calculate"),
        event(201, "tool_call", "tool", tool_name="calculate"),
        event(230, "tool_result", "tool", tool_name="calculate", content="42"),
        event(400, "delta", "content", content="The answer is 42."),
        event(450, "delta", "content", content=" Done."),
        event(470, "done", "done", status="done"),
    ]
    timeline = turn_timeline(events)
    assert timeline["total_ms"] == 470
    assert rows(timeline) == [
        ("Steward, wall clock", 0, 40, ""),
        ("Bundle", 40, 15, "300 schema"),
        ("Knowledge", 55, 5, "1 snippets"),
        ("Model call 1", 70, 130, "500 in · 0 out"),
        ("Tool calculate", 200, 30, "1 result"),
        ("Model call 2", 230, 220, f"500 in · {count_tokens('The answer is 42. Done.')} out"),
        ("Record", 450, 20, ""),
    ]
    assert [(step["offset"], step["width"]) for step in timeline["steps"]][3] == (14.89, 27.66)


def test_an_approval_waits_from_its_request_to_its_decision_and_approved_calls_need_no_new_model_call():
    events = [
        event(0, "routing", "routing", loaded_schema_tokens=10),
        event(100, "tool_call", "tool", tool_name="lookup"),
        event(110, "tool_result", "tool", tool_name="lookup", content="x"),
        event(120, "tool_call", "tool", tool_name="lookup"),  # the same model step's second call
        event(125, "tool_result", "tool", tool_name="lookup", content="y"),
        event(300, "approval_required", "approval_required", tool_name="transfer"),
        event(5300, "status", "approval_decided"),
        event(5400, "status", "resumed"),
        event(5410, "tool_call", "tool", tool_name="transfer"),
        event(5500, "tool_result", "tool", tool_name="transfer", content="ok"),
        event(5600, "delta", "content", content="Done."),
        event(5610, "done", "done"),
    ]
    labels = [(step["label"], step["start_ms"], step["ms"]) for step in turn_timeline(events)["steps"]]
    assert labels == [
        ("Bundle", 0, 0),
        ("Model call 1", 0, 100),
        ("Tool lookup", 100, 10),
        ("Tool lookup", 120, 5),  # the transfer's request follows a result: no new model call is seen
        ("Approval of transfer", 300, 5000),
        ("Tool transfer", 5410, 90),
        ("Model call 2", 5500, 100),
        ("Record", 5600, 10),
    ]


def test_no_events_no_timeline():
    assert turn_timeline([]) is None


@pytest.mark.django_db
def test_a_real_turn_has_the_steward_bundle_model_tool_and_record_steps_in_order(demo_catalog):
    turn = create_turn(Conversation.objects.create(owner=make_user()), "What is 15 + 27?")
    runtime.run_turn(turn.id)
    (view,) = turn_views([turn])
    kinds = [step["kind"] for step in view["timeline"]["steps"]]
    assert kinds[:2] == ["steward", "bundle"] and kinds[-1] == "record"
    assert "model" in kinds and kinds.index("tool") > kinds.index("model")
    stored = TurnEvent.objects.filter(turn=turn).order_by("sequence")
    assert view["timeline"]["total_ms"] == round(
        (stored.last().created_at - stored.first().created_at).total_seconds() * 1000
    )


@pytest.mark.django_db
def test_the_live_timeline_after_the_last_event_is_the_one_the_page_shows_afterwards(demo_catalog, client):
    owner = make_user("owner", role="operator")
    turn = create_turn(Conversation.objects.create(owner=owner), "What is 15 + 27?")
    runtime.run_turn(turn.id)
    client.force_login(owner)
    page = client.get(f"/console/{turn.conversation_id}/").content.decode()
    last = stored_events(turn.id)[-1]
    live = render_event(last, can_decide=True, timeline=timeline_of(turn.id, up_to=last["sequence"]))

    def section(html: str) -> str:
        return html.split(f'<details id="turn-{turn.id}-timeline"')[1].split("</details>")[0]

    assert section(live) == section(page)
    assert '<th scope="row">Steward, wall clock</th>' in section(page) and "Tool calculate" in section(page)
    # An earlier event (a gap filled) draws the timeline as it stood then: no tool step yet.
    call = next(e for e in stored_events(turn.id) if e["type"] == "tool_call")
    assert "Tool calculate" not in str(timeline_of(turn.id, up_to=call["sequence"] - 1))
