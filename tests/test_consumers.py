"""Console WebSockets: refused without login or permission; history first, then live, never a gap or a duplicate."""

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import connections

from agents.consumers import FORBIDDEN
from agents.events import CONSOLE_GROUP, MESSAGE_TYPE, emit, serialize
from agents.models import Conversation, Message, RoutingLog, Turn, TurnEvent
from agents.routing import websocket_urlpatterns
from agents.turns import create_turn
from tests.builders import make_user

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
PATHS = ["/ws/console/", "/ws/console/{conversation}/", "/ws/overview/"]


@pytest_asyncio.fixture
async def communicator():
    """Makes communicators for the route table alone (the test puts the user in the scope as AuthMiddlewareStack
    would) and disconnects each one still running before the test's loop closes: a consumer left to the loop's
    teardown is cancelled inside the Redis layer's receive, which can hang the teardown."""
    made = []

    def make(path: str, user) -> WebsocketCommunicator:
        socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
        socket.scope["user"] = user
        made.append(socket)
        return socket

    yield make
    for socket in made:
        if not socket.future.done():
            await socket.disconnect()
    await sync_to_async(connections.close_all)()  # the sync thread's connection, or it outlives the test database


@sync_to_async
def new_turn(owner, text="What is 15 + 27?"):
    conversation = Conversation.objects.create(owner=owner, title=text)
    return create_turn(conversation, text)


@sync_to_async
def store(turn, type, **payload):
    return emit(turn.id, type, phase=payload.pop("phase", ""), **payload)


def finish(turn, answer: str) -> None:
    """What the runtime stores before its done event: the answer and the final status."""
    Message.objects.create(conversation_id=turn.conversation_id, turn=turn, role=Message.Role.ASSISTANT, content=answer)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE)


@pytest.mark.parametrize("path", PATHS)
async def test_anonymous_users_are_refused(path, communicator):
    owner = await sync_to_async(make_user)("owner", role="viewer")
    turn = await new_turn(owner)
    socket = communicator(path.format(conversation=turn.conversation_id), AnonymousUser())
    connected, code = await socket.connect()
    assert not connected and code == FORBIDDEN


@pytest.mark.parametrize("path", PATHS)
async def test_users_without_the_view_permission_are_refused(path, communicator):
    owner = await sync_to_async(make_user)("owner", role="viewer")
    nobody = await sync_to_async(get_user_model().objects.create_user)("nobody", password="a-long-test-password")
    turn = await new_turn(owner)
    socket = communicator(path.format(conversation=turn.conversation_id), nobody)
    connected, code = await socket.connect()
    assert not connected and code == FORBIDDEN


async def test_a_viewer_of_a_missing_conversation_is_refused(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    connected, _ = await communicator("/ws/console/999999/", viewer).connect()
    assert not connected


async def test_a_late_joiner_gets_the_stored_history_then_live_events_without_duplicates(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    await store(turn, TurnEvent.Type.DELTA, phase="content", content="15 + 27 ")
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    connected, _ = await socket.connect()
    assert connected
    history = await socket.receive_from()
    assert 'id="thread"' in history
    assert f'id="event-{turn.id}-1"' in history and "Consulting the steward" in history and "15 + 27 " in history

    # The same stored event broadcast again (a redelivery) is dropped.
    stored = await sync_to_async(TurnEvent.objects.get)(turn=turn, sequence=1)
    layer = get_channel_layer()
    await layer.group_send(CONSOLE_GROUP, {"type": MESSAGE_TYPE, "event": serialize(stored)})
    assert await socket.receive_nothing(timeout=0.3)

    await store(turn, TurnEvent.Type.DELTA, phase="content", content="= 42")
    live = await socket.receive_from()
    assert f'hx-swap-oob="beforeend:#turn-{turn.id}-content"' in live and "= 42" in live
    assert "Consulting the steward" not in live
    await socket.disconnect()


async def test_a_gap_in_live_events_is_filled_from_the_store_in_order(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="first")
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    assert (await socket.connect())[0]
    await socket.receive_from()
    # Stored but its broadcast never arrived (say, a lost message): the next event brings it along.
    await sync_to_async(TurnEvent.objects.create)(
        turn=turn, sequence=2, type=TurnEvent.Type.STATUS, phase="tool", payload={"message": "second"}
    )
    await store(turn, TurnEvent.Type.STATUS, phase="tool", message="third")
    first, second = await socket.receive_from(), await socket.receive_from()
    assert "second" in first and f'id="event-{turn.id}-2"' in first
    assert "third" in second and f'id="event-{turn.id}-3"' in second
    assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect()


async def test_a_conversation_viewer_ignores_other_conversations_and_picks_up_its_new_turns(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    other = await new_turn(viewer, "another conversation")
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    assert (await socket.connect())[0]
    await socket.receive_from()
    await store(other, TurnEvent.Type.STATUS, phase="analysis", message="not this one")
    assert await socket.receive_nothing(timeout=0.3)
    conversation = await sync_to_async(Conversation.objects.get)(pk=turn.conversation_id)
    second = await sync_to_async(create_turn)(conversation, "and 2 + 2?")
    await store(second, TurnEvent.Type.STATUS, phase="analysis", message="second turn starts")
    appended = await socket.receive_from()
    assert 'hx-swap-oob="beforeend:#thread"' in appended and f'id="turn-{second.id}"' in appended
    assert "second turn starts" in appended and "and 2 + 2?" in appended
    await socket.disconnect()


async def test_approval_buttons_only_for_users_who_may_decide(communicator):
    owner = await sync_to_async(make_user)("owner", role="viewer")
    operator = await sync_to_async(make_user)("operator", role="operator")
    turn = await new_turn(owner)
    sockets = {}
    for user in (owner, operator):
        sockets[user.username] = communicator(f"/ws/console/{turn.conversation_id}/", user)
        assert (await sockets[user.username].connect())[0]
        await sockets[user.username].receive_from()
    await store(turn, TurnEvent.Type.APPROVAL_REQUIRED, phase="approval_required", approval_id=7,
                tool_name="restart_container", arguments={"container": "web"}, risk="high")  # fmt: skip
    seen = {name: await socket.receive_from() for name, socket in sockets.items()}
    assert 'id="approval-7"' in seen["owner"] and 'value="approve"' not in seen["owner"]
    assert 'value="approve"' in seen["operator"] and 'value="deny"' in seen["operator"]
    for socket in sockets.values():
        await socket.disconnect()


async def test_the_list_shows_a_new_conversation_at_the_top_and_then_updates_its_row(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    socket = communicator("/ws/console/", viewer)
    assert (await socket.connect())[0]
    assert 'id="conversation-list"' in await socket.receive_from()
    turn = await new_turn(viewer, "What is 6 * 7?")
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    inserted = await socket.receive_from()
    assert 'hx-swap-oob="afterbegin:#conversation-list"' in inserted and "What is 6 * 7?" in inserted
    await store(turn, TurnEvent.Type.DELTA, phase="content", content="6 * 7 = 42")
    delta = await socket.receive_from()
    assert f"#conversation-{turn.conversation_id}-preview" in delta and "6 * 7 = 42" in delta
    await sync_to_async(finish)(turn, "6 * 7 = 42")
    await store(turn, TurnEvent.Type.DONE, phase="done", status="done")
    updated = await socket.receive_from()
    assert f'<li id="conversation-{turn.conversation_id}"' in updated and "afterbegin" not in updated
    assert "status-done" in updated and "6 * 7 = 42" in updated
    await socket.disconnect()


async def test_the_overview_sends_its_live_counters_on_connect(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    socket = communicator("/ws/overview/", viewer)
    assert (await socket.connect())[0]
    live = await socket.receive_from()
    assert 'id="overview-live"' in live and "turns running" in live
    await socket.disconnect()


async def test_the_overview_refreshes_its_counters_when_a_turn_moves_and_ignores_content_deltas(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    socket = communicator("/ws/overview/", viewer)
    assert (await socket.connect())[0]
    first = await socket.receive_from()
    assert 'data-counter="turns_last_minute">0<' in first
    turn = await new_turn(viewer)
    await store(turn, TurnEvent.Type.DELTA, phase="content", content="partial answer")
    assert await socket.receive_nothing(timeout=1.3)  # content alone changes no counter
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    refreshed = await socket.receive_from(timeout=3)
    assert 'id="overview-live"' in refreshed and 'data-counter="turns_last_minute">1<' in refreshed
    await socket.disconnect()


async def test_the_overview_refresh_carries_the_turn_total_and_the_new_request_row(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    socket = communicator("/ws/overview/", viewer)
    assert (await socket.connect())[0]
    first = await socket.receive_from()
    assert 'data-counter="turns_total">0<' in first and "No requests yet." in first
    turn = await new_turn(viewer, "Which rules expire this week?")
    await sync_to_async(RoutingLog.objects.create)(turn=turn, query="Which rules expire this week?", decision={})
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    refreshed = await socket.receive_from(timeout=3)
    assert 'data-counter="turns_total">1<' in refreshed
    assert "Which rules expire this week?</a>" in refreshed and "No requests yet." not in refreshed
    await socket.disconnect()
