"""An MCP server's question during a turn's tool call: asked of an operator, answered, declined or cancelled once,
declined when nobody answers in time, and what the waiting call is told each time. (Operators answering at once:
tests/integration/test_questions_postgres.py.)"""

import asyncio
import concurrent.futures
import sys
import time

import pytest
from django.utils import timezone

from agents.models import Conversation, ServerQuestion, Turn, TurnEvent
from agents.turns import questions
from agents.turns.cancellation import cancel_turn
from agents.turns.events import TurnTakenOver
from agents.turns.questions import Outcome, QuestionClosed
from agents.turns.sampling import turn_caller
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.callers import calling_as
from catalog.models import McpServer
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
FORM = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture
def running_turn():
    owner = make_user("owner", role="operator")
    return Turn.objects.create(conversation=Conversation.objects.create(owner=owner), status=Turn.Status.RUNNING,
                               attempt=1)  # fmt: skip


def ask(turn, seconds=30.0) -> ServerQuestion:
    return questions.ask(turn_id=turn.pk, attempt=turn.attempt, message="Favourite colour?", schema=FORM,
                         seconds=seconds)  # fmt: skip


def settle(question: ServerQuestion) -> Outcome | None:
    return questions.settle(question.pk, turn_id=question.turn_id, attempt=1)


def statuses(turn) -> list[tuple[str, str]]:
    events = TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.STATUS).order_by("sequence")
    return [(event.phase, event.payload["message"]) for event in events]


def test_asking_stores_a_pending_question_and_says_the_turn_waits_for_the_operator(running_turn):
    question = ask(running_turn, seconds=20)
    assert (question.status, question.message, question.requested_schema) == ("pending", "Favourite colour?", FORM)
    assert 19 < (question.expires_at - timezone.now()).total_seconds() <= 20
    (event,) = TurnEvent.objects.filter(turn=running_turn)
    assert (event.type, event.phase, event.payload["question_id"]) == ("status", "question_asked", question.pk)
    assert event.payload["message"] == "❓ Waiting for an answer from the operator: Favourite colour?"


def test_a_turn_no_longer_run_by_the_attempt_is_not_asked(running_turn):
    Turn.objects.filter(pk=running_turn.pk).update(status=Turn.Status.CANCELLED)
    with pytest.raises(TurnTakenOver):
        ask(running_turn)
    assert not ServerQuestion.objects.exists()


def test_an_answer_is_taken_once_and_the_waiting_call_gets_it(running_turn):
    question = ask(running_turn)
    operator = make_user("alice", role="operator")
    questions.answer_question(question_id=question.pk, user=operator, content={"answer": "blue"})
    with pytest.raises(QuestionClosed, match="already answered"):
        questions.decline_question(question_id=question.pk, user=make_user("bob", role="operator"))
    question.refresh_from_db()
    assert (question.status, question.answer, question.answered_by) == ("answered", {"answer": "blue"}, operator)
    outcome = settle(question)
    assert outcome == Outcome("accept", {"answer": "blue"})
    answered = '💬 alice answered the server\'s question: {"answer": "blue"}'
    assert statuses(running_turn)[-1] == ("question_closed", answered)


def test_a_decline_is_told_as_declined_and_says_who(running_turn):
    question = ask(running_turn)
    questions.decline_question(question_id=question.pk, user=make_user("alice", role="operator"))
    outcome = settle(question)
    assert outcome == Outcome("decline")
    assert statuses(running_turn)[-1] == ("question_closed", "🚫 alice declined the server's question")


def test_nobody_answering_in_time_declines_it_with_the_reason_in_the_timeline_and_the_log(running_turn, caplog):
    question = ask(running_turn, seconds=30)
    assert settle(question) is None  # it waits
    ServerQuestion.objects.filter(pk=question.pk).update(expires_at=timezone.now())
    outcome = settle(question)
    assert outcome == Outcome("decline")
    question.refresh_from_db()
    assert question.status == "expired" and question.answered_by is None
    expired = "⌛ No operator answered the server's question within the tool call's time: declined"
    assert statuses(running_turn)[-1] == ("question_closed", expired)
    assert f"question {question.pk} of turn {running_turn.pk} expired" in caplog.text
    with pytest.raises(QuestionClosed, match="out of time"):
        questions.answer_question(question_id=question.pk, user=make_user("late"), content={"answer": "x"})


def test_an_answer_after_the_deadline_is_refused_even_before_the_waiter_expires_it(running_turn):
    question = ask(running_turn)
    ServerQuestion.objects.filter(pk=question.pk).update(expires_at=timezone.now())
    with pytest.raises(QuestionClosed, match="already out of time"):
        questions.answer_question(question_id=question.pk, user=make_user("late"), content={"answer": "x"})


def test_cancelling_the_turn_cancels_its_question_and_the_waiting_call_is_told_cancel(running_turn):
    question = ask(running_turn)
    assert cancel_turn(turn_id=running_turn.pk, user=make_user("alice", role="operator"))
    question.refresh_from_db()
    assert question.status == "cancelled"
    assert ("question_closed", "⏹ The server's question was cancelled with the turn by alice") in statuses(running_turn)
    outcome = settle(question)
    assert outcome == Outcome("cancel")


def test_a_turn_taken_over_while_its_question_waits_withdraws_the_question(running_turn, caplog):
    question = ask(running_turn)
    Turn.objects.filter(pk=running_turn.pk).update(attempt=2)  # the watchdog restarted it
    outcome = settle(question)
    assert outcome == Outcome("cancel")
    assert ServerQuestion.objects.get(pk=question.pk).status == "cancelled"
    assert "withdrawn: its turn is no longer running" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_wait_the_tool_call_gives_up_withdraws_the_question_and_a_turn_not_running_is_not_asked(running_turn):
    question = ask(running_turn)

    async def give_up() -> None:
        waiting = asyncio.ensure_future(questions.wait_for_answer(question.pk, turn_id=running_turn.pk, attempt=1))
        await asyncio.sleep(0.3)  # it has looked once at least
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(give_up())
    assert ServerQuestion.objects.get(pk=question.pk).status == "cancelled"
    assert statuses(running_turn)[-1] == (
        "question_closed", "⏹ The server's question was withdrawn: the tool call stopped waiting for it")  # fmt: skip
    Turn.objects.filter(pk=running_turn.pk).update(status=Turn.Status.CANCELLED)
    asked = questions.ask_and_wait(turn_id=running_turn.pk, attempt=1, message="?", schema=FORM, seconds=5)
    assert asyncio.run(asked) == Outcome("cancel")
    assert ServerQuestion.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_turns_mcp_call_waits_for_the_operators_answer_and_the_server_gets_it(settings, running_turn):
    """The embedded path (SQLite, the call on the MCP client's loop thread, the wait in a thread of its own)."""
    settings.TOOLHUB_MCP_TIMEOUT = 30
    server = McpServer.objects.create(name="asking", command=sys.executable,
                                      args=["-m", "tests.support.asking_mcp_server"])  # fmt: skip
    caller = turn_caller(owner=running_turn.conversation.owner, conversation_id=running_turn.conversation_id,
                         model=None, turn_id=running_turn.pk, attempt=1)  # fmt: skip

    def call() -> str:
        with calling_as(caller):
            return mcp_client.call_tool(server, "ask", {"value": "Favourite colour?"}).content

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        result = pool.submit(call)
        deadline = time.monotonic() + 30
        while (question := ServerQuestion.objects.filter(status="pending").first()) is None:
            assert time.monotonic() < deadline and not result.done(), "no question was asked"
            time.sleep(0.05)
        assert question.message == "Favourite colour?" and question.requested_schema["required"] == ["answer"]
        assert 20 < (question.expires_at - timezone.now()).total_seconds() < 28  # the call's time less the margin
        questions.answer_question(question_id=question.pk, user=make_user("alice"), content={"answer": "teal"})
        assert result.result(timeout=30) == 'action=accept content={"answer": "teal"}'
    mcp_client.close_all()
