"""An MCP server's question during a turn's tool call, in the console: its card and form on the conversation page, in
the approvals inbox and alone; the answer checked on the server (400 with the errors), declined, taken once (409),
and only by those who may approve calls."""

import pytest

from agents.console import fragments
from agents.console.approval_inbox import waiting_count
from agents.models import Conversation, ServerQuestion, Turn, TurnEvent
from agents.openai_api.completions import sse_frames
from agents.turns import questions
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "title": "Colour <i>please</i>", "description": "One word", "maxLength": 10},
        "count": {"type": "integer", "minimum": 1},
        "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
        "extras": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
        "ok": {"type": "boolean"},
    },
    "required": ["colour", "count"],
}


@pytest.fixture
def asked():
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner, title="paint")
    turn = Turn.objects.create(conversation=conversation, status=Turn.Status.RUNNING, attempt=1)
    return questions.ask(turn_id=turn.pk, attempt=1, message="Which <script>alert(1)</script> colour?", schema=SCHEMA,
                         seconds=60)  # fmt: skip


def card(page: str, question: ServerQuestion) -> str:
    start = page.index(f'id="question-{question.pk}"')
    return page[start : page.index("</form>", start) if "</form>" in page[start:] else None]


def test_the_conversation_page_shows_the_question_as_a_form_built_from_its_schema(client, asked):
    client.force_login(make_user("second", role="operator"))
    page = client.get(f"/console/{asked.turn.conversation_id}/").content.decode()
    shown = card(page, asked)
    assert "waiting for an answer from the operator" in shown and "answer by <time" in shown
    assert "Which &lt;script&gt;alert(1)&lt;/script&gt; colour?" in shown and "<script>alert" not in page
    label = f'for="question-{asked.pk}-field-colour">Colour &lt;i&gt;please&lt;/i&gt;</label>'
    assert label + ' <span class="required">(required)' in shown
    assert 'name="field-colour"' in shown and 'maxlength="10"' in shown and "One word" in shown
    assert 'type="number" name="field-count"' in shown and 'min="1"' in shown
    assert '<option value="l">Large</option>' in shown and 'type="checkbox" name="field-extras" value="y"' in shown
    assert 'value="answer">Submit</button>' in shown and 'value="decline" class="secondary" formnovalidate>' in shown


def test_a_viewer_sees_the_question_but_no_form(client, asked):
    client.force_login(make_user("watcher", role="viewer"))
    page = client.get(f"/console/{asked.turn.conversation_id}/").content.decode()
    assert "waiting for an answer from the operator" in page and 'name="field-colour"' not in page
    response = client.post(f"/console/questions/{asked.pk}/", {"decision": "decline"})
    assert response.status_code == 403
    assert ServerQuestion.objects.get(pk=asked.pk).status == "pending"


def test_an_operators_answer_is_checked_against_the_schema_and_shown_again_with_its_errors(client, asked):
    client.force_login(make_user("second", role="operator"))
    url = f"/console/questions/{asked.pk}/"
    bad = client.post(url, {"decision": "answer", "field-colour": "ultramarine blue", "field-count": "0"},
                      headers=HTMX)  # fmt: skip
    assert bad.status_code == 400
    shown = bad.content.decode()
    assert "at most 10 characters" in shown and "greater than or equal to 1" in shown
    assert 'value="ultramarine blue"' in shown  # what was typed stays
    plain = client.post(url, {"decision": "answer", "field-count": "2"})  # without JS: the question's page, 400
    assert plain.status_code == 400 and "This field is required." in plain.content.decode()
    assert ServerQuestion.objects.get(pk=asked.pk).status == "pending"

    good = client.post(url, {"decision": "answer", "field-colour": "teal", "field-count": "2", "field-extras": ["y"],
                             "field-ok": "on"}, headers=HTMX)  # fmt: skip
    assert good.status_code == 200
    assert "answered by second" in good.content.decode() and "name=" not in good.content.decode()
    asked.refresh_from_db()
    assert asked.answer == {"colour": "teal", "count": 2, "extras": ["y"], "ok": True}
    again = client.post(url, {"decision": "decline"}, headers=HTMX)
    assert again.status_code == 409 and "This question is already answered." in again.content.decode()


def test_an_operator_declines_without_filling_the_form(client, asked):
    client.force_login(make_user("second", role="operator"))
    response = client.post(f"/console/questions/{asked.pk}/", {"decision": "decline"})
    assert response.status_code == 302
    assert response["Location"] == f"/console/{asked.turn.conversation_id}/#turn-{asked.turn_id}"
    asked.refresh_from_db()
    assert (asked.status, asked.answered_by.username) == ("declined", "second")
    page = client.get(f"/console/{asked.turn.conversation_id}/").content.decode()
    assert "declined by second" in page and "🚫 second declined the server&#x27;s question" in page


def test_a_post_without_a_decision_is_a_400_not_a_500(client, asked):
    client.force_login(make_user("second", role="operator"))
    response = client.post(f"/console/questions/{asked.pk}/", {"field-colour": "x"}, headers=HTMX)
    assert response.status_code == 400 and "Choose Submit or Decline." in response.content.decode()
    assert client.post("/console/questions/999999/", {"decision": "decline"}).status_code == 404


def test_the_inbox_lists_a_waiting_question_with_its_form_and_counts_it(client, asked):
    operator = make_user("second", role="operator")
    client.force_login(operator)
    page = client.get("/approvals/").content.decode()
    item = page.split(f'id="inbox-question-{asked.pk}"')[1].split("</li>")[0]
    assert "paint, turn" in item and "started by owner" in item and 'name="field-colour"' in item
    assert waiting_count(operator) == 1
    questions.decline_question(question_id=asked.pk, user=operator)
    assert waiting_count(operator) == 0
    assert f"inbox-question-{asked.pk}" not in client.get("/approvals/").content.decode()


def test_a_live_question_renders_its_form_and_its_close_replaces_the_card():
    event = {"turn": 7, "sequence": 3, "type": TurnEvent.Type.STATUS, "phase": questions.ASKED_PHASE,
             "payload": {"question_id": 5, "question": "Sure?", "schema": SCHEMA, "message": "❓ …",
                         "expires_at": "2030-01-01T00:00:00+00:00"}}  # fmt: skip
    html = fragments.render_event(event, can_decide=True)
    assert 'id="question-5"' in html and 'name="field-colour"' in html and "An MCP server asks the operator" in html
    closed = {"turn": 7, "sequence": 4, "type": TurnEvent.Type.STATUS, "phase": questions.CLOSED_PHASE,
              "payload": {"question_id": 5, "decision": "declined",
                          "message": "🚫 ann declined the server's question"}}  # fmt: skip
    html = fragments.render_event(closed, can_decide=True)
    assert '<div id="question-5" class="question question-declined">' in html and "ann declined" in html


def test_the_sse_stream_says_the_turn_waits_for_the_operator_with_the_questions_id():
    event = {"turn": 7, "sequence": 3, "type": TurnEvent.Type.STATUS, "phase": questions.ASKED_PHASE,
             "payload": {"question_id": 5, "question": "Sure?", "schema": SCHEMA,
                         "message": "❓ Waiting for an answer from the operator: Sure?"}}  # fmt: skip
    (frame,) = sse_frames(event, "chatcmpl-1", "toolhub")
    assert (frame["type"], frame["phase"], frame["question_id"]) == ("status", "question_asked", 5)
    assert frame["message"] == "❓ Waiting for an answer from the operator: Sure?" and "schema" not in frame
