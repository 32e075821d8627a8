"""Console WebSockets: send HTML fragments (htmx ws extension, out-of-band swaps) for the turn events they follow.

Thin: check the permission on connect (anonymous or without
agents.view_turn -> closed before accept), join the `console` group, send
the current state as one fragment, then one fragment per live event.
Rendering lives in agents.console and agents.overview. Never writes.

A conversation viewer sees the stored history first, then live events:
it joins the group before reading the store, drops what it already sent
(sequence <= last) and fills any gap from the store, so nothing is missed
or shown twice.
"""

import asyncio
import time
from collections import OrderedDict

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from . import console, overview
from .approvals import PERMISSION as DECIDE_PERMISSION
from .events import CONSOLE_GROUP
from .models import Conversation, TurnEvent

VIEW_PERMISSION = "agents.view_turn"
FORBIDDEN = 4403  # close code: not logged in or no permission (the htmx ws extension does not reconnect)
NOT_FOUND = 4404
OVERVIEW_REFRESH_SECONDS = 1.0
FRAGMENT_CACHE_SIZE = 2048

# Every viewer of a turn gets the same fragment for an event: render it (and read its routing log) once per process.
# The cache holds tasks, so viewers that receive the event at the same moment share one rendering.
_fragments: OrderedDict[tuple, asyncio.Task] = OrderedDict()


async def _render(event: dict, can_decide: bool) -> str:
    routing = timeline = None
    if console.needs_routing_log(event):
        routing = await database_sync_to_async(console.routing_log)(event["turn"])
    if console.needs_timeline(event):
        timeline = await database_sync_to_async(console.timeline_of)(event["turn"], event["sequence"])
    return console.render_event(event, can_decide=can_decide, routing=routing, timeline=timeline)


async def event_fragment(event: dict, *, can_decide: bool) -> str:
    key = (event["turn"], event["sequence"], event.get("created_at"), can_decide)  # an event never changes
    task = _fragments.get(key)
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = _fragments[key] = asyncio.ensure_future(_render(event, can_decide))
        if len(_fragments) > FRAGMENT_CACHE_SIZE:
            _fragments.popitem(last=False)
    return await asyncio.shield(task)


@database_sync_to_async
def _permissions(user) -> tuple[bool, bool]:
    if not user.is_authenticated:
        return False, False
    return user.has_perm(VIEW_PERMISSION), user.has_perm(DECIDE_PERMISSION)


class ConsoleBase(AsyncWebsocketConsumer):
    async def connect(self):
        self.may_view, self.can_decide = await _permissions(self.scope["user"])
        if not self.may_view:
            await self.close(code=FORBIDDEN)
            return
        if not await self.prepare():
            await self.close(code=NOT_FOUND)
            return
        await self.accept()
        await self.channel_layer.group_add(CONSOLE_GROUP, self.channel_name)
        await self.send(text_data=await self.snapshot())

    async def disconnect(self, code):
        await self.channel_layer.group_discard(CONSOLE_GROUP, self.channel_name)

    async def prepare(self) -> bool:
        return True

    async def snapshot(self) -> str:
        raise NotImplementedError


class ConversationListConsumer(ConsoleBase):
    """/ws/console/: the list of recent conversations; rows appear and change as their turns move."""

    async def snapshot(self) -> str:
        rows = await database_sync_to_async(console.conversation_rows)()
        self.listed = {row["id"] for row in rows}
        self.conversations: dict[int, int] = {row["turn_id"]: row["id"] for row in rows}
        return console.render_list(rows)

    async def turn_event(self, message):
        event = message["event"]
        turn_id = event["turn"]
        conversation_id = self.conversations.get(turn_id)
        if conversation_id is None:
            conversation_id = await database_sync_to_async(console.conversation_of)(turn_id)
            if conversation_id is None:
                return
            self.conversations[turn_id] = conversation_id
        if event["type"] == TurnEvent.Type.DELTA:
            if conversation_id in self.listed:
                await self.send(text_data=console.render_preview_delta(conversation_id, event["payload"]["content"]))
            return
        if event["type"] not in console.ROW_EVENT_TYPES and conversation_id in self.listed:
            return
        rows = await database_sync_to_async(console.conversation_rows)(ids=[conversation_id])
        if rows:
            await self.send(text_data=console.render_row_update(rows[0], listed=conversation_id in self.listed))
            self.listed.add(conversation_id)


class ConversationConsumer(ConsoleBase):
    """/ws/console/<id>/: one conversation's thread, history first, then live events."""

    async def prepare(self) -> bool:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.foreign: set[int] = set()
        return await database_sync_to_async(Conversation.objects.filter(pk=self.conversation_id).exists)()

    async def snapshot(self) -> str:
        conversation = await database_sync_to_async(Conversation.objects.get)(pk=self.conversation_id)
        html, self.last = await database_sync_to_async(console.render_thread)(conversation, can_decide=self.can_decide)
        return html

    async def turn_event(self, message):
        event = message["event"]
        turn_id = event["turn"]
        if turn_id in self.foreign:
            return
        if turn_id not in self.last:
            if not await database_sync_to_async(console.turn_in_conversation)(turn_id, self.conversation_id):
                self.foreign.add(turn_id)
                return
            html, self.last[turn_id] = await database_sync_to_async(console.render_new_turn)(
                turn_id, can_decide=self.can_decide
            )
            await self.send(text_data=html)
            return
        last = self.last[turn_id]
        if event["sequence"] <= last:
            return  # already shown (from the history or an earlier gap fill)
        events = [event]
        if event["sequence"] != last + 1:
            events = await database_sync_to_async(console.missing_events)(turn_id, after=last)
        for each in events:
            await self.send(text_data=await event_fragment(each, can_decide=self.can_decide))
            self.last[turn_id] = each["sequence"]


class OverviewConsumer(ConsoleBase):
    """/ws/overview/: the overview's live section (counters, turn total, charts, recent requests), refreshed at most
    once a second while turns move."""

    async def snapshot(self) -> str:
        self.refreshed = time.monotonic()
        self.pending = None
        return await database_sync_to_async(overview.render_live)()

    async def turn_event(self, message):
        if message["event"]["type"] == TurnEvent.Type.DELTA or self.pending is not None:
            return
        wait = self.refreshed + OVERVIEW_REFRESH_SECONDS - time.monotonic()
        self.pending = asyncio.get_running_loop().call_later(max(wait, 0), self.schedule_refresh)

    def schedule_refresh(self):
        asyncio.ensure_future(self.refresh())

    async def refresh(self):
        self.pending = None
        self.refreshed = time.monotonic()
        await self.send(text_data=await database_sync_to_async(overview.render_live)())

    async def disconnect(self, code):
        if getattr(self, "pending", None) is not None:
            self.pending.cancel()
        await super().disconnect(code)
