"""Starting a turn: store the user's message and a queued Turn, then enqueue it after commit.

Views, the API and consumers call `start_turn`; none of them runs a turn
itself. In the embedded default Celery is eager, so the caller runs the turn
in its own thread (the SSE view does that off the event loop).
"""

from django.db import transaction

from .models import Conversation, Message, Turn
from .tasks import run_turn


@transaction.atomic
def create_turn(conversation: Conversation, user_text: str, *, two_stage: bool = True, client=None) -> Turn:
    """`client`: the API client's own tools (agents.client_tools.ClientTools), offered to the model this turn."""
    tools = {"client_tools": list(client.definitions), "tool_choice": client.tool_choice,
             "parallel_tool_calls": client.parallel_tool_calls} if client else {}  # fmt: skip
    turn = Turn.objects.create(conversation=conversation, two_stage=two_stage, **tools)
    Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.USER, content=user_text)
    return turn


def enqueue_turn(turn_id: int) -> None:
    """Hand the turn to Celery once its rows are committed (runs now when eager)."""
    run_turn.delay_on_commit(turn_id)


def start_console_turn(*, user, text: str, conversation: Conversation | None = None, model_profile=None) -> Turn:
    """A turn from the console chat, stored and enqueued exactly as the API does; a new conversation when none."""
    with transaction.atomic():
        if conversation is None:
            conversation = Conversation.objects.create(owner=user, model_profile=model_profile, title=text[:200])
        turn = create_turn(conversation, text)
    enqueue_turn(turn.id)
    return turn
