"""Console WebSockets: send HTML fragments (htmx ws extension, out-of-band swaps) for the turn events they follow.

Thin: check the permission on connect (anonymous or without
agents.view_turn -> closed before accept), join the process's console
fan-out (agents/console/fanout.py: one channel in the `console` group per
process, not one per socket), send the current state as one fragment,
then one fragment per live event: events that queued for a socket while
it drew the previous one go out together in one frame (a burst of events
costs each socket one send, not one per event). Rendering lives in
agents.console.fragments and agents.console.overview (an event's fragment, and the
overview's live section after an event, once per process). Never writes.

A conversation viewer sees the stored history first, then live events:
it joins the fan-out before reading the store, drops what it already sent
(sequence <= last) and fills any gap from the store, so nothing is missed
or shown twice.

Each socket renders in its viewer's time zone (agents/account/zones.py:
their saved zone, else their browser's cookie, else the server's), active
for the socket's whole life; what is rendered once per process for all
viewers is rendered once per zone (the zone is part of its cache key).
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.utils import await_many_dispatch
from django.utils import timezone

from agents.account.zones import zone_for
from agents.models import Conversation, TurnEvent
from agents.turns.approvals import PERMISSION as DECIDE_PERMISSION
from agents.turns.events import MESSAGE_TYPE

from . import fragments, overview
from .fanout import FanoutLost, console_fanout

VIEW_PERMISSION = "agents.view_turn"
FORBIDDEN = 4403  # close code: not logged in or no permission (the htmx ws extension does not reconnect)
NOT_FOUND = 4404
OVERVIEW_REFRESH_SECONDS = 1.0
SHARED_CACHE_SIZE = 2048

# Every viewer of a turn gets the same fragment for an event, and every list viewer the same row: render it (and read
# what it shows) once per process. The cache holds tasks, so viewers that get the event at the same moment share one.
_shared: OrderedDict[tuple, asyncio.Task] = OrderedDict()


async def once_per_process(key: tuple, make: Callable[[], Awaitable]):
    """`await make()` for the first socket that needs `key`; the others get the same result (a failure is retried)."""
    task = _shared.get(key)
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = _shared[key] = asyncio.ensure_future(make())
        if len(_shared) > SHARED_CACHE_SIZE:
            _shared.popitem(last=False)
    return await asyncio.shield(task)


async def _render(event: dict, can_decide: bool, own: bool) -> str:
    routing = timeline = None
    if fragments.needs_routing_log(event):
        routing = await database_sync_to_async(fragments.routing_log)(event["turn"])
    if fragments.needs_timeline(event):
        timeline = await database_sync_to_async(fragments.timeline_of)(event["turn"], event["sequence"])
    return fragments.render_event(event, can_decide=can_decide, own=own, routing=routing, timeline=timeline)


async def event_fragment(event: dict, *, can_decide: bool, own: bool = False) -> str:
    """`own`: the viewer started the turn (four eyes: its risky calls show Deny only). Rendered in the current time
    zone (the socket's) and shared with the sockets of that zone: an event's fragment never changes."""
    zone = timezone.get_current_timezone_name()
    key = ("fragment", event["turn"], event["sequence"], event.get("created_at"), can_decide, own, zone)
    return await once_per_process(key, lambda: _render(event, can_decide, own))


@database_sync_to_async
def _permissions(user) -> tuple[bool, bool]:
    if not user.is_authenticated:
        return False, False
    return user.has_perm(VIEW_PERMISSION), user.has_perm(DECIDE_PERMISSION)


@database_sync_to_async
def _zone(scope) -> str:
    """The viewer's zone, as their pages get it from agents.account.middleware (the socket carries their cookies)."""
    return zone_for(scope["user"], scope.get("cookies", {})).name


class ConsoleBase(AsyncWebsocketConsumer):
    async def __call__(self, scope, receive, send):
        """AsyncConsumer's loop with the socket's inbox (the process's console fan-out) in place of a channel of its
        own: one message at a time, WebSocket messages and turn events in the order they came."""
        self.scope = scope
        self.channel_layer = None  # the fan-out follows the group; this socket has no channel
        self.inbox = asyncio.Queue()
        self.base_send = send
        try:
            await await_many_dispatch([receive, self.inbox.get], self.dispatch)
        except StopConsumer:
            pass
        finally:
            await console_fanout().leave(self.inbox)

    async def dispatch(self, message):
        if message["type"] == MESSAGE_TYPE:
            # Not through AsyncConsumer.dispatch: its close_old_connections is a thread hop per socket and event,
            # and every database read here goes through database_sync_to_async, which does it in its thread.
            await self.turn_event(message)
        else:
            await super().dispatch(message)

    async def connect(self):
        self.may_view, self.can_decide = await _permissions(self.scope["user"])
        if not self.may_view:
            await self.close(code=FORBIDDEN)
            return
        # For the socket's life: its task, the threads it reads and renders in, and the shared renders it starts.
        self.zone = await _zone(self.scope)
        timezone.activate(self.zone)
        if not await self.prepare():
            await self.close(code=NOT_FOUND)
            return
        await self.accept()
        await console_fanout().join(self.inbox)
        await self.send(text_data=await self.snapshot())

    async def fanout_lost(self, message):
        raise FanoutLost("the channel layer failed: this socket may have missed events (it reconnects and replays)")

    async def prepare(self) -> bool:
        return True

    async def snapshot(self) -> str:
        raise NotImplementedError


class ConversationListConsumer(ConsoleBase):
    """/ws/console/: the list of recent conversations; rows appear and change as their turns move."""

    async def snapshot(self) -> str:
        rows = await database_sync_to_async(fragments.conversation_rows)()
        self.listed = {row["id"] for row in rows}
        self.conversations: dict[int, int] = {row["turn_id"]: row["id"] for row in rows}
        return fragments.render_list(rows)

    async def turn_event(self, message):
        event = message["event"]
        turn_id = event["turn"]
        conversation_id = self.conversations.get(turn_id)
        if conversation_id is None:
            conversation_id = await once_per_process(
                ("conversation", turn_id), lambda: database_sync_to_async(fragments.conversation_of)(turn_id)
            )
            if conversation_id is None:
                return
            self.conversations[turn_id] = conversation_id
        if event["type"] == TurnEvent.Type.DELTA:
            if conversation_id in self.listed:
                await self.send(text_data=fragments.render_preview_delta(conversation_id, event["payload"]["content"]))
            return
        if event["type"] not in fragments.ROW_EVENT_TYPES and conversation_id in self.listed:
            return
        rows = await once_per_process(
            ("row", turn_id, event["sequence"], event.get("created_at")),
            lambda: database_sync_to_async(fragments.conversation_rows)(ids=[conversation_id]),
        )
        if rows:
            await self.send(text_data=fragments.render_row_update(rows[0], listed=conversation_id in self.listed))
            self.listed.add(conversation_id)


class ConversationConsumer(ConsoleBase):
    """/ws/console/<id>/: one conversation's thread, history first, then live events."""

    async def prepare(self) -> bool:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.foreign: set[int] = set()
        return await database_sync_to_async(Conversation.objects.filter(pk=self.conversation_id).exists)()

    async def snapshot(self) -> str:
        conversation = await database_sync_to_async(Conversation.objects.get)(pk=self.conversation_id)
        self.own = conversation.owner_id == self.scope["user"].pk  # the owner starts every turn of it
        html, self.last = await database_sync_to_async(fragments.render_thread)(
            conversation, can_decide=self.can_decide, own=self.own
        )
        return html

    async def turn_event(self, message):
        """Draw the event, and with it every event that queued for this socket meanwhile: one frame for a burst."""
        html = await self.fragments(message)
        while not self.inbox.empty():
            queued = self.inbox.get_nowait()
            if queued["type"] != MESSAGE_TYPE:  # the fan-out lost the group: send what is drawn, then fail
                break
            html += await self.fragments(queued)
        else:
            queued = None
        if html:
            await self.send(text_data=html)
        if queued is not None:
            await self.dispatch(queued)

    async def fragments(self, message) -> str:
        """What the event adds to this conversation's page ("" for another conversation's or one already shown)."""
        event = message["event"]
        turn_id = event["turn"]
        if turn_id in self.foreign:
            return ""
        if turn_id not in self.last:
            if not await database_sync_to_async(fragments.turn_in_conversation)(turn_id, self.conversation_id):
                self.foreign.add(turn_id)
                return ""
            html, self.last[turn_id] = await database_sync_to_async(fragments.render_new_turn)(
                turn_id, can_decide=self.can_decide, own=self.own
            )
            return html
        last = self.last[turn_id]
        if event["sequence"] <= last:
            return ""  # already shown (from the history or an earlier gap fill)
        events = [event]
        if event["sequence"] != last + 1:
            events = await database_sync_to_async(fragments.missing_events)(turn_id, after=last)
        html = ""
        for each in events:
            html += await event_fragment(each, can_decide=self.can_decide, own=self.own)
            self.last[turn_id] = each["sequence"]
        return html


class OverviewConsumer(ConsoleBase):
    """/ws/overview/: the overview's live section (counters, turn total, charts, recent requests), refreshed at most
    once a second while turns move. The section is the same for every viewer: a refresh is rendered once per process
    for the last event its sockets heard (they all hear the same events), so a render that one socket started after
    that event serves the others, finished or still running."""

    async def snapshot(self) -> str:
        self.refreshed = time.monotonic()
        self.pending = None
        self.heard: tuple | None = None
        return await database_sync_to_async(overview.render_live)()

    async def turn_event(self, message):
        event = message["event"]
        if event["type"] == TurnEvent.Type.DELTA:
            return
        self.heard = ("overview", event["turn"], event["sequence"], event.get("created_at"), self.zone)
        if self.pending is not None:
            return
        wait = self.refreshed + OVERVIEW_REFRESH_SECONDS - time.monotonic()
        self.pending = asyncio.get_running_loop().call_later(max(wait, 0), self.schedule_refresh)

    def schedule_refresh(self):
        asyncio.ensure_future(self.refresh())

    async def refresh(self):
        self.pending = None
        self.refreshed = time.monotonic()
        fragment = await once_per_process(self.heard, database_sync_to_async(overview.render_live))
        await self.send(text_data=fragment)

    async def disconnect(self, code):
        if getattr(self, "pending", None) is not None:
            self.pending.cancel()
