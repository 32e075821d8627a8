"""Console WebSockets: refused without login or permission; history first, then live, never a gap or a duplicate;
each process follows the console group once and fans every event out to its own sockets (agents/console/fanout.py)."""

import asyncio
import datetime
import re

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from agents.account.zones import save_time_zone
from agents.console import consumers, fanout, overview
from agents.console import fragments as console
from agents.console.consumers import FORBIDDEN
from agents.console.fanout import LOST, FanoutLost, GroupFanout, console_fanout
from agents.models import Conversation, Message, RoutingLog, Turn, TurnEvent
from agents.turns.events import CONSOLE_GROUP, MESSAGE_TYPE, emit, serialize
from agents.turns.start import create_turn
from tests.agents.console.conftest import ARRIVAL
from tests.support.builders import make_user

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
PATHS = ["/ws/console/", "/ws/console/{conversation}/", "/ws/overview/"]


# The overview's refresh interval here (1 s in use): each overview test waited a whole interval for its refresh.
REFRESH = 0.2


@pytest.fixture(autouse=True)
def _short_overview_interval(monkeypatch):
    monkeypatch.setattr(consumers, "OVERVIEW_REFRESH_SECONDS", REFRESH)


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
    frame = await socket.receive_from()  # the gap and the event that revealed it: one frame, in order
    assert event_ids(frame, turn) == [2, 3] and frame.index("second") < frame.index("third")
    assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect()


async def test_events_that_queue_while_a_socket_draws_go_out_in_its_next_frame_in_order(communicator, monkeypatch):
    from agents.console import consumers

    drawing = consumers.event_fragment

    async def slow_first(event, **viewer):
        if event["sequence"] == 1:
            await asyncio.sleep(0.5)  # events 2 and 3 reach the socket's inbox meanwhile
        return await drawing(event, **viewer)

    monkeypatch.setattr(consumers, "event_fragment", slow_first)
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    assert (await socket.connect())[0]
    await socket.receive_from()
    for number in range(1, 4):
        await store(turn, TurnEvent.Type.STATUS, phase="analysis", message=f"step {number}")
    frame = await socket.receive_from(timeout=5)
    assert event_ids(frame, turn) == [1, 2, 3]
    assert [int(n) for _, n in re.findall(r"<!-- event (\d+)/(\d+) -->", frame)] == [1, 2, 3]
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


async def test_the_operator_who_started_the_turn_gets_deny_only_for_a_high_risk_call(communicator):
    owner = await sync_to_async(make_user)("owner", role="operator")
    second = await sync_to_async(make_user)("second", role="operator")
    turn = await new_turn(owner)
    sockets = {}
    for user in (owner, second):
        sockets[user.username] = communicator(f"/ws/console/{turn.conversation_id}/", user)
        assert (await sockets[user.username].connect())[0]
        await sockets[user.username].receive_from()
    await store(turn, TurnEvent.Type.APPROVAL_REQUIRED, phase="approval_required", approval_id=8,
                tool_name="restart_container", arguments={"container": "web"}, risk="high")  # fmt: skip
    seen = {name: await socket.receive_from() for name, socket in sockets.items()}
    assert 'value="approve"' not in seen["owner"] and 'value="deny"' in seen["owner"]
    assert "Needs another operator" in seen["owner"]
    assert 'value="approve"' in seen["second"] and "Needs another operator" not in seen["second"]
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
    assert await socket.receive_nothing(timeout=REFRESH * 4)  # content alone changes no counter
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    refreshed = await socket.receive_from(timeout=3)
    assert 'id="overview-live"' in refreshed and 'data-counter="turns_last_minute">1<' in refreshed
    await socket.disconnect()


async def test_the_overview_refreshes_once_for_the_events_of_an_interval_and_not_before_it_ends(
    communicator, monkeypatch
):
    monkeypatch.setattr(consumers, "OVERVIEW_REFRESH_SECONDS", 1.0)
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    socket = communicator("/ws/overview/", viewer)
    assert (await socket.connect())[0]
    await socket.receive_from()
    turn = await new_turn(viewer)
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    await store(turn, TurnEvent.Type.STATUS, phase="bundle", message="Bundle ready")
    assert await socket.receive_nothing(timeout=0.3)  # within the interval of the connect's render
    refreshed = await socket.receive_from(timeout=3)  # one refresh for both events
    assert 'data-counter="turns_last_minute">1<' in refreshed
    await store(turn, TurnEvent.Type.STATUS, phase="tool", message="Calling a tool")
    assert await socket.receive_nothing(timeout=0.3)  # within the interval of that refresh
    assert 'id="overview-live"' in await socket.receive_from(timeout=3)
    assert await socket.receive_nothing(timeout=0.3)
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


@pytest.fixture
def overview_renders(monkeypatch):
    """Each call of overview.render_live, recorded (the overview still renders)."""
    renders, real = [], overview.render_live

    def counted():
        renders.append(1)
        return real()

    monkeypatch.setattr(overview, "render_live", counted)
    return renders


async def connected_overviews(communicator, viewer, count: int) -> list:
    """`count` overview sockets of `viewer`, each past its first fragment."""
    sockets = [communicator("/ws/overview/", viewer) for _ in range(count)]
    for socket in sockets:
        assert (await socket.connect())[0]
        await socket.receive_from()
    return sockets


async def test_one_render_of_the_overview_serves_every_overview_socket_of_the_process(communicator, overview_renders):
    renders = overview_renders
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    sockets = await connected_overviews(communicator, viewer, 3)
    after_connecting = len(renders)
    turn = await new_turn(viewer)
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")

    refreshed = [await socket.receive_from(timeout=3) for socket in sockets]

    assert all('data-counter="turns_last_minute">1<' in fragment for fragment in refreshed)
    assert len(renders) - after_connecting == 1  # one render for the three sockets' refreshes


async def test_each_event_after_a_refresh_gets_a_render_of_its_own_shared_by_the_sockets(
    communicator, overview_renders
):
    renders = overview_renders
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    sockets = await connected_overviews(communicator, viewer, 2)
    turn = await new_turn(viewer, "Which rules expire this week?")
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    first = [await socket.receive_from(timeout=3) for socket in sockets]
    after_first = len(renders)
    # A change after that render: the next refresh must not reuse it.
    await sync_to_async(RoutingLog.objects.create)(turn=turn, query="Which rules expire this week?", decision={})
    await store(turn, TurnEvent.Type.STATUS, phase="bundle", message="Bundle ready")
    second = [await socket.receive_from(timeout=3) for socket in sockets]

    assert all("No requests yet." in fragment for fragment in first)
    assert all("Which rules expire this week?</a>" in fragment for fragment in second)
    assert len(renders) - after_first == 1


def event_ids(fragment: str, turn) -> list[int]:
    """The sequences of the turn's events a fragment draws (its `event-<turn>-<sequence>` items)."""
    return [int(n) for n in re.findall(rf'id="event-{turn.id}-(\d+)"', fragment)]


async def draw(socket, turn, count: int) -> list[int]:
    """The sequences of the next `count` events the socket draws, over as many frames as it takes: events that
    queue while a socket draws go out together in its next frame, so how many frames depends on the host's pace."""
    drawn: list[int] = []
    while len(drawn) < count:
        drawn += event_ids(await socket.receive_from(), turn)
    return drawn


async def test_two_processes_each_follow_the_console_group_once_and_hand_every_event_to_each_of_their_sockets():
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    processes = [GroupFanout(CONSOLE_GROUP), GroupFanout(CONSOLE_GROUP)]  # two processes' fan-outs, one layer
    inboxes = [[asyncio.Queue() for _ in range(3)] for _ in processes]
    for process, sockets in zip(processes, inboxes, strict=True):
        for inbox in sockets:
            await process.join(inbox)
    assert len(get_channel_layer().groups[CONSOLE_GROUP]) == 2  # one member per process, not one per socket
    for number in range(1, 4):
        await store(turn, TurnEvent.Type.STATUS, phase="analysis", message=f"step {number}")
    for inbox in [inbox for sockets in inboxes for inbox in sockets]:
        received = [(await asyncio.wait_for(inbox.get(), 5))["event"]["sequence"] for _ in range(3)]
        assert received == [1, 2, 3] and inbox.empty()
    for process, sockets in zip(processes, inboxes, strict=True):
        for inbox in sockets:
            await process.leave(inbox)
    assert not get_channel_layer().groups.get(CONSOLE_GROUP)  # the last socket out takes its process out


async def test_the_sockets_of_a_process_share_one_group_member_and_each_draws_every_event_once_in_order(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    sockets = [communicator(f"/ws/console/{turn.conversation_id}/", viewer) for _ in range(3)]
    for socket in sockets:
        assert (await socket.connect())[0]
        await socket.receive_from()
    assert len(get_channel_layer().groups[CONSOLE_GROUP]) == 1
    for number in range(1, 4):
        await store(turn, TurnEvent.Type.STATUS, phase="analysis", message=f"step {number}")
    for socket in sockets:
        assert await draw(socket, turn, 3) == [1, 2, 3]
        assert await socket.receive_nothing(timeout=0.2)


async def test_a_socket_that_disconnects_mid_fan_out_leaves_the_others_every_event(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    stays, leaves, also_stays = (communicator(f"/ws/console/{turn.conversation_id}/", viewer) for _ in range(3))
    for socket in (stays, leaves, also_stays):
        assert (await socket.connect())[0]
        await socket.receive_from()
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="step 1")
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="step 2")
    await leaves.disconnect()  # events 1 and 2 are in its inbox, or on their way there
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="step 3")
    for socket in (stays, also_stays):
        assert await draw(socket, turn, 3) == [1, 2, 3]
    assert len(console_fanout().inboxes) == 2
    await stays.disconnect()
    await also_stays.disconnect()
    assert not console_fanout().inboxes and console_fanout().reader is None
    assert not get_channel_layer().groups.get(CONSOLE_GROUP)


class FailingLayer:
    """A channel layer whose receive fails, as Redis restarting makes it."""

    def __init__(self):
        self.members: set[str] = set()

    async def new_channel(self):
        return f"failing!{len(self.members)}"

    async def group_add(self, group, channel):
        self.members.add(channel)

    async def group_discard(self, group, channel):
        self.members.discard(channel)

    async def receive(self, channel):
        raise ConnectionError("Redis is restarting")


async def test_a_failed_channel_layer_sends_lost_to_every_socket_and_the_next_join_follows_again(monkeypatch):
    layer = FailingLayer()
    monkeypatch.setattr(fanout, "get_channel_layer", lambda: layer)
    process = GroupFanout(CONSOLE_GROUP)
    inboxes = [asyncio.Queue(), asyncio.Queue()]
    for inbox in inboxes:
        await process.join(inbox)
    for inbox in inboxes:
        assert await asyncio.wait_for(inbox.get(), 5) == LOST
    assert not process.inboxes
    later = asyncio.Queue()
    await process.join(later)  # a reconnecting socket: a new reader on a new channel
    assert process.inboxes == {later} and process.reader is not None
    assert await asyncio.wait_for(later.get(), 5) == LOST


async def test_a_socket_told_its_process_lost_the_group_fails_so_the_browser_reconnects_and_replays(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    assert (await socket.connect())[0]
    await socket.receive_from()
    (inbox,) = console_fanout().inboxes
    inbox.put_nowait(LOST)
    # The application fails (Daphne closes a socket whose application failed with 1011: htmx reconnects). Awaited
    # as the application itself: receive_from would wait out its whole timeout for output that never comes.
    with pytest.raises(FanoutLost):
        await asyncio.wait_for(socket.future, ARRIVAL)
    assert not console_fanout().inboxes


async def test_list_viewers_of_a_process_share_one_read_of_a_changed_row(communicator, monkeypatch):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    reads = []
    rows = console.conversation_rows
    monkeypatch.setattr(console, "conversation_rows", lambda **kwargs: reads.append(kwargs) or rows(**kwargs))
    sockets = [communicator("/ws/console/", viewer) for _ in range(3)]
    for socket in sockets:
        assert (await socket.connect())[0]
        await socket.receive_from()
    turn = await new_turn(viewer, "What is 6 * 7?")
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    for socket in sockets:
        inserted = await socket.receive_from()
        assert 'hx-swap-oob="afterbegin:#conversation-list"' in inserted and "What is 6 * 7?" in inserted
    assert [read for read in reads if "ids" in read] == [{"ids": [turn.conversation_id]}]  # one read, not three


async def test_each_overview_socket_renders_in_its_viewers_zone_before_and_after_a_refresh(communicator):
    """The refresh is rendered once per process for each zone its sockets show, not once for all of them."""
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    tokyo = communicator("/ws/overview/", viewer)
    tokyo.scope["cookies"] = {"toolhub_tz": "Asia/Tokyo"}  # as AuthMiddlewareStack's CookieMiddleware puts them
    server = communicator("/ws/overview/", viewer)  # no cookie: the server's zone
    for socket in (tokyo, server):
        assert (await socket.connect())[0]
    assert "minute (Asia/Tokyo)" in await tokyo.receive_from()
    assert "minute (UTC)" in await server.receive_from()
    turn = await new_turn(viewer)
    await store(turn, TurnEvent.Type.STATUS, phase="analysis", message="Consulting the steward")
    assert "minute (Asia/Tokyo)" in await tokyo.receive_from(timeout=3)
    assert "minute (UTC)" in await server.receive_from(timeout=3)


async def test_a_conversation_socket_shows_times_in_the_viewers_saved_zone(communicator):
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    await sync_to_async(save_time_zone)(user=viewer, name="Asia/Tokyo")
    turn = await new_turn(viewer)
    await sync_to_async(Turn.objects.filter(pk=turn.pk).update)(
        created_at=datetime.datetime(2026, 1, 15, 3, 4, 5, tzinfo=datetime.UTC)
    )
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    socket.scope["cookies"] = {"toolhub_tz": "America/New_York"}  # the saved zone wins
    assert (await socket.connect())[0]
    assert "2026-01-15 12:04:05 JST" in await socket.receive_from()


async def test_a_turn_that_ended_before_the_socket_opened_is_still_announced_if_just_now(communicator):
    """The turn may end between the page's render and its socket's first frame: the snapshot tells the live region
    what the done event would have; a turn that ended long ago is not announced again."""
    viewer = await sync_to_async(make_user)("viewer", role="viewer")
    turn = await new_turn(viewer)
    await sync_to_async(Turn.objects.filter(pk=turn.pk).update)(status=Turn.Status.DONE, finished_at=timezone.now())
    socket = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    assert (await socket.connect())[0]
    announced = '<div id="turn-announcer" hx-swap-oob="innerHTML">The answer is complete.</div>'
    assert announced in await socket.receive_from()
    await socket.disconnect()
    long_ago = timezone.now() - datetime.timedelta(minutes=5)
    await sync_to_async(Turn.objects.filter(pk=turn.pk).update)(finished_at=long_ago)
    again = communicator(f"/ws/console/{turn.conversation_id}/", viewer)
    assert (await again.connect())[0]
    assert "turn-announcer" not in await again.receive_from()
    await again.disconnect()
