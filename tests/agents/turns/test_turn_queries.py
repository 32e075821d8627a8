"""What a builtin turn costs the database: its statements and transactions are pinned, so waste cannot creep back.

Where the turn's writes go (docs/operations/capacity.md, "Where a builtin turn's time goes"): each event is one
statement that checks the run's hold on the turn and inserts (its number comes from the run, not from a read; no
transaction or savepoint of its own), a tool's result is stored with its tool message, the answer with the turn's
end and the routing outcome, the routing log is written once with its knowledge, learning reads the routing log once.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Conversation, Turn, TurnEvent
from agents.turns import runtime
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db

WRITES = ("INSERT", "UPDATE", "DELETE")


def run_counted(owner, text: str) -> tuple[Turn, list[str]]:
    turn = create_turn(Conversation.objects.create(owner=owner), text)
    with CaptureQueriesContext(connection) as queries:
        runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn, [query["sql"] for query in queries.captured_queries]


def statements_and_transactions(queries: list[str]) -> tuple[int, int]:
    """(statements, transactions the turn commits in production). The test runs inside a transaction, so each of
    the turn's transactions shows as an outermost savepoint; a write outside one commits on its own."""
    statements, transactions, depth = 0, 0, 0
    for sql in queries:
        if sql.startswith("SAVEPOINT"):
            transactions += depth == 0
            depth += 1
        elif sql.startswith(("RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")):
            depth -= sql.startswith("RELEASE")
        else:
            statements += 1
            transactions += depth == 0 and sql.startswith(WRITES)
    return statements, transactions


@pytest.mark.parametrize(
    ("text", "events", "most_statements", "most_transactions"),
    [
        ("What is 15 + 27?", 10, 36, 13),  # the calculator: one tool call, two model steps
        ("What is the capital of France?", 8, 21, 10),  # no tool: one step
    ],
)
def test_a_builtin_turn_runs_at_most_its_pinned_statements_and_transactions(
    demo_catalog, text, events, most_statements, most_transactions
):
    owner = make_user()
    run_counted(owner, "What is 2 + 2?")  # warm: the catalog's view of the process
    turn, queries = run_counted(owner, text)
    assert turn.status == Turn.Status.DONE
    assert TurnEvent.objects.filter(turn=turn).count() == events  # the same turn as when the counts were pinned
    statements, transactions = statements_and_transactions(queries)
    assert statements <= most_statements, "\n".join(queries)
    assert transactions <= most_transactions, "\n".join(queries)


def test_a_turn_keeps_what_its_model_calls_were_sent_and_wrote_when_it_ends(demo_catalog):
    """Read by the UPDATE that ends it (lifecycle.spent): no statement of its own; the answer stored after it counts."""
    from agents.models import Message
    from agents.turns.lifecycle import PROMPT_PARTS, end_turn

    turn, _ = run_counted(make_user(), "What is 15 + 27?")
    budgets = TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.ROUTING, phase="budget")
    sent = sum(event.payload[part] for event in budgets for part in PROMPT_PARTS)
    wrote = sum(Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).values_list("tokens", flat=True))
    assert budgets.count() == 2 and sent > 0 and wrote > 0
    assert (turn.prompt_tokens, turn.completion_tokens) == (sent, wrote)

    failing = create_turn(Conversation.objects.create(owner=turn.conversation.owner), "later")
    parts = {"system": 5, "tools": 6, "knowledge": 7, "memory": 8, "reserve": 1000}  # the reserve is no prompt
    TurnEvent.objects.create(turn=failing, sequence=50, type=TurnEvent.Type.ROUTING, phase="budget", payload=parts)
    assert end_turn(failing.id, Turn.Status.FAILED, "model_unavailable", "The model did not answer.")
    failing.refresh_from_db()
    assert (failing.prompt_tokens, failing.completion_tokens) == (26, 0)
