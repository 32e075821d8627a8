"""A conversation's page as an operator reads it: turns numbered in their conversation, older ended turns folded to a
line, a tool's result beside its call's arguments, tool names linked to their policy and activity, a live region
for approvals, failures and answers, and a Send that says why it waits."""

import re

import pytest

from agents.console.fragments import TURNS_SHOWN_WHOLE, event_item, render_event, tool_link, turn_views
from agents.models import Conversation, Turn, TurnEvent
from agents.turns import runtime
from agents.turns.events import emit, stored_events
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


def ended_turn(conversation: Conversation, text: str, status: str = Turn.Status.DONE) -> Turn:
    turn = create_turn(conversation, text)
    Turn.objects.filter(pk=turn.pk).update(status=status)
    return turn


def test_turns_are_numbered_in_their_conversation_and_keep_their_id_beside(client):
    owner = make_user("owner", role="operator")
    ours, other = Conversation.objects.create(owner=owner), Conversation.objects.create(owner=owner)
    first = ended_turn(ours, "first")
    ended_turn(other, "elsewhere")  # another conversation's turn between ours takes no number of ours
    second = ended_turn(ours, "second")
    client.force_login(owner)
    page = client.get(f"/console/{ours.pk}/").content.decode()
    titles = re.findall(r'<h2 id="turn-(\d+)-title">Turn (\d+) <span class="muted turn-id">#(\d+)</span>', page)
    assert titles == [(str(first.pk), "1", str(first.pk)), (str(second.pk), "2", str(second.pk))]
    (view,) = turn_views([Turn.objects.get(pk=second.pk)])  # a turn drawn alone (a live new turn) is numbered too
    assert view["number"] == 2


def test_older_ended_turns_fold_to_a_summary_line_and_unended_ones_never_do(client):
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner)
    waiting = ended_turn(conversation, "an old turn still waiting", Turn.Status.WAITING)
    done = [ended_turn(conversation, f"question {n} " + "long " * 40) for n in range(TURNS_SHOWN_WHOLE + 1)]
    client.force_login(owner)
    page = client.get(f"/console/{conversation.pk}/").content.decode()
    folded = re.findall(r'<details class="turn-fold" id="turn-(\d+)-fold">\s*<summary>(.*?)</summary>', page, re.S)
    assert [int(turn_id) for turn_id, _ in folded] == [done[0].pk]  # the waiting turn stays whole, however old
    summary = folded[0][1]
    assert "<strong>Turn 2</strong>" in summary and "status-done" in summary and "question 0" in summary
    assert len(re.sub(r"<[^>]+>", "", summary)) < 200  # the request cut to a line
    assert f'id="turn-{done[0].pk}-events"' in page  # folded, not left out: live events and deep links still find it
    assert f'<article id="turn-{waiting.pk}"' in page.split('class="turn-fold"')[0]


def test_a_tools_result_shows_beside_its_calls_arguments_and_names_link_to_policy_and_activity(demo_catalog):
    turn = create_turn(Conversation.objects.create(owner=make_user()), "What is 15 + 27?")
    runtime.run_turn(turn.id)
    result = next(e for e in stored_events(turn.id) if e["type"] == TurnEvent.Type.TOOL_RESULT)
    assert result["payload"]["arguments"] == {"expression": "15 + 27"}  # stored with the result
    live = render_event(result, can_decide=False)
    linked = '<a href="/policies/calculate/" class="tool-link" title="Policy of calculate"><code>calculate</code></a>'
    assert f"← {linked}" in live
    assert '(<span class="call-arguments">{&quot;expression&quot;: &quot;15 + 27&quot;}</span>)' in live
    assert 'href="/console/tools/calculate/" class="tool-activity" aria-label="Activity of calculate"' in live
    assert '<pre class="result"' in live.split("call-arguments")[1]  # the result follows the arguments


def test_a_result_stored_without_its_arguments_takes_them_from_its_call(client):
    owner = make_user("owner", role="operator")
    turn = create_turn(Conversation.objects.create(owner=owner), "twice")
    for expression in ("1 + 1", "2 + 2"):  # two calls, then their results, stored before results carried arguments
        emit(turn.id, TurnEvent.Type.TOOL_CALL, phase="tool", tool_name="calculate",
             arguments={"expression": expression})  # fmt: skip
    for answer in ("2", "4"):
        emit(turn.id, TurnEvent.Type.TOOL_RESULT, phase="tool", tool_name="calculate", content=answer)
    (view,) = turn_views([turn])
    results = [item for item in view["items"] if item["kind"] == TurnEvent.Type.TOOL_RESULT]
    assert [(item["call"]["arguments"], item["result"]) for item in results] == [
        ('{"expression": "1 + 1"}', "2"), ('{"expression": "2 + 2"}', "4")
    ]  # fmt: skip
    client.force_login(owner)
    assert client.get(f"/console/{turn.conversation_id}/").content.decode().count('class="call-arguments"') == 4


def test_a_name_no_url_takes_is_shown_unlinked_and_client_tools_are_never_linked():
    assert tool_link("a/b") == {"name": "a/b", "policy": "", "activity": ""}
    call = {"turn": 1, "sequence": 3, "type": "tool_call", "phase": "tool",
            "payload": {"tool_name": "get_weather", "arguments": {}, "client": True}}  # fmt: skip
    html = render_event(call, can_decide=False)
    assert "<code>get_weather</code>" in html and "/policies/get_weather/" not in html
    bundle = {"turn": 1, "sequence": 2, "type": "routing", "phase": "routing",
              "payload": {"loaded": ["calculate"], "client_tools": ["get_weather"]}}  # fmt: skip
    assert event_item(bundle)["tools"] == [tool_link("calculate")] and event_item(bundle)["client_tools"] == [
        "get_weather"
    ]


@pytest.mark.parametrize(
    "type,payload,said",
    [
        ("approval_required", {"tool_name": "transfer_points", "risk": "high"},
         "Approval needed: transfer_points, high risk."),
        ("error", {"message": "The model did not answer."}, "The turn failed: The model did not answer."),
        ("done", {"status": "done"}, "The answer is complete."),
        ("done", {"status": "cancelled"}, "The turn was cancelled."),
        ("done", {"status": "failed"}, None),  # its error event said why
        ("delta", {"content": "Hel"}, None),
    ],
)  # fmt: skip
def test_the_live_region_announces_approvals_failures_and_answers(type, payload, said):
    html = render_event({"turn": 1, "sequence": 4, "type": type, "phase": "", "payload": payload}, can_decide=False)
    announced = re.findall(r'<div id="turn-announcer" hx-swap-oob="innerHTML">(.*?)</div>', html)
    assert announced == ([said] if said else [])


def test_the_page_has_the_live_region_and_says_how_to_send_from_the_keyboard(client):
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner)
    client.force_login(owner)
    page = client.get(f"/console/{conversation.pk}/").content.decode()
    assert '<div id="turn-announcer" class="visually-hidden" role="status" aria-live="polite"></div>' in page
    assert "or Ctrl+Enter (⌘+Enter) in the message" in page


def test_the_steward_times_are_named_for_what_they_measure(demo_catalog, client):
    owner = make_user("owner", role="operator")
    turn = create_turn(Conversation.objects.create(owner=owner), "What is 15 + 27?")
    runtime.run_turn(turn.id)
    client.force_login(owner)
    page = client.get(f"/console/{turn.conversation_id}/").content.decode()
    assert re.search(r"routing computed in \d+ ms", page) and '<th scope="row">Steward, wall clock</th>' in page
