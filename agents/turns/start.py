"""Starting a turn: store the user's message and a queued Turn, then enqueue it after commit.

Views, the API and consumers call `start_turn`; none of them runs a turn
itself. In the embedded default Celery is eager, so the caller runs the turn
in its own thread (the SSE view does that off the event loop), except the
console's chat: it answers at once and the turn runs in a thread of the
process (agents.turns.dispatch.start_in_background), so the page it leads to streams the turn.
"""

from django.contrib.auth.models import User
from django.db import transaction

from agents.models import Conversation, Message, ModelProfile, Turn

from .client_tools import ClientTools
from .dispatch import start_in_background


@transaction.atomic
def create_turn(
    conversation: Conversation, user_text: str, *, two_stage: bool = True, client: ClientTools | None = None
) -> Turn:
    """`client`: the API client's own tools (agents.turns.client_tools.ClientTools), offered to the model this turn."""
    tools = {"client_tools": list(client.definitions), "tool_choice": client.tool_choice,
             "parallel_tool_calls": client.parallel_tool_calls} if client else {}  # fmt: skip
    turn = Turn.objects.create(conversation=conversation, two_stage=two_stage, **tools)
    Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.USER, content=user_text)
    return turn


def start_console_turn(
    *, user: User, text: str, conversation: Conversation | None = None, model_profile: ModelProfile | None = None
) -> Turn:
    """A turn from the console chat, stored as the API does and started without waiting for it (the page that
    answers streams it); a new conversation when none."""
    with transaction.atomic():
        if conversation is None:
            conversation = Conversation.objects.create(owner=user, model_profile=model_profile, title=text[:200])
        turn = create_turn(conversation, text)
    start_in_background(turn.id)
    return turn
