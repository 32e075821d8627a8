"""Operators answering an MCP server's question at once, on PostgreSQL: one answer or decline is taken, the others
are told the question is closed, and one event says who closed it."""

import pytest

from agents.models import Conversation, ServerQuestion, Turn, TurnEvent
from agents.turns import questions
from agents.turns.questions import QuestionClosed
from tests.support.builders import at_once, make_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
FORM = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_conflict_eight_operators_answering_or_declining_at_once_close_the_question_once():
    turn = Turn.objects.create(conversation=Conversation.objects.create(owner=make_user("owner")),
                               status=Turn.Status.RUNNING, attempt=1)  # fmt: skip
    question = questions.ask(turn_id=turn.pk, attempt=1, message="Favourite colour?", schema=FORM, seconds=60)
    operators = [make_user(f"op{i}", role="operator") for i in range(8)]

    def close(i: int) -> ServerQuestion:
        if i % 2:
            return questions.decline_question(question_id=question.pk, user=operators[i])
        return questions.answer_question(question_id=question.pk, user=operators[i], content={"answer": f"a{i}"})

    outcomes = at_once(8, close)
    closed = [value for kind, value in outcomes if kind == "ok"]
    refused = [value for kind, value in outcomes if kind == "error"]
    assert len(closed) == 1 and len(refused) == 7
    assert all(isinstance(error, QuestionClosed) for error in refused), refused
    question.refresh_from_db()
    winner = closed[0]
    assert (question.status, question.answer, question.answered_by) == (winner.status, winner.answer,
                                                                        winner.answered_by)  # fmt: skip
    (event,) = TurnEvent.objects.filter(turn=turn, phase=questions.CLOSED_PHASE)
    assert event.payload["answered_by"] == winner.answered_by.username
