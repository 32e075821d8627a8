"""Console fan-out: each process follows the `console` group on one channel and hands every event to its sockets.

The channel layer then delivers a broadcast once per process, not once per console socket: one channel-layer
receive per event, and each local socket gets the message in its inbox (an asyncio.Queue its consumer reads in
order, between its WebSocket messages). `join` returns once the process's channel is in the group, so a socket
that reads the store after joining misses nothing (the consumers drop what they already showed by sequence and
fill gaps from the store). If the channel layer fails (Redis restarting), every socket that was following gets
LOST (its consumer raises FanoutLost, as it raised the layer's error when it had a channel of its own: Daphne
closes the socket with 1011, the browser reconnects and replays from the store) and the next join starts over.

Never renders, never reads the database. The SSE streams (agents/openai_api/completions.py) follow their turn's group on
a channel each: one reader per stream, nothing to share.
"""

import asyncio
import logging
import weakref
from contextlib import suppress

from channels.layers import get_channel_layer

from agents.turns.events import CONSOLE_GROUP

log = logging.getLogger(__name__)

LOST = {"type": "fanout.lost"}  # to an inbox: the process stopped following the group (FanoutLost)
# A layer forgets a group member after its group_expiry (a day by default): the process's channel joins again this
# often, so a process serving consoles for days stays in the group.
REJOIN_SECONDS = 3600.0


class FanoutLost(Exception):
    """The channel layer failed under this process's fan-out: the socket missed what was broadcast meanwhile."""


class GroupFanout:
    """One channel in `group` for this event loop, read by one task that copies each message to every inbox."""

    def __init__(self, group: str):
        self.group = group
        self.inboxes: set[asyncio.Queue] = set()
        self.lock = asyncio.Lock()  # joins and leaves start and stop the reader one at a time
        self.reader: asyncio.Task | None = None
        self.channel = ""

    async def join(self, inbox: asyncio.Queue) -> None:
        """From now on every message sent to the group reaches `inbox`, in the order the layer delivers them."""
        async with self.lock:
            if self.reader is None or self.reader.done():
                layer = get_channel_layer()
                self.channel = await layer.new_channel()
                await layer.group_add(self.group, self.channel)
                self.reader = asyncio.ensure_future(self.read(layer, self.channel))
            self.inboxes.add(inbox)

    async def leave(self, inbox: asyncio.Queue) -> None:
        """Stop copying to `inbox`; the last inbox to leave takes the process's channel out of the group."""
        async with self.lock:
            self.inboxes.discard(inbox)
            if self.inboxes or self.reader is None:
                return
            reader, self.reader = self.reader, None
            reader.cancel()
            with suppress(asyncio.CancelledError):
                await reader
            with suppress(Exception):  # a layer that failed has already lost the membership
                await get_channel_layer().group_discard(self.group, self.channel)

    async def read(self, layer, channel: str) -> None:
        receiving = asyncio.ensure_future(layer.receive(channel))
        try:
            while True:
                # One receive stays pending while the process rejoins: cancelling it would drop what it buffered.
                done, _ = await asyncio.wait({receiving}, timeout=REJOIN_SECONDS)
                if not done:
                    await layer.group_add(self.group, channel)
                    continue
                message = receiving.result()
                receiving = asyncio.ensure_future(layer.receive(channel))
                for inbox in self.inboxes:
                    inbox.put_nowait(message)
        except Exception as error:
            log.warning("%s: the channel layer failed (%r); closing this process's %d sockets", self.group, error,
                        len(self.inboxes))  # fmt: skip
            for inbox in self.inboxes:
                inbox.put_nowait(LOST)
            self.inboxes.clear()  # the next join starts a new reader for the sockets that reconnect
        finally:
            receiving.cancel()


_console: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GroupFanout] = weakref.WeakKeyDictionary()


def console_fanout() -> GroupFanout:
    """This process's fan-out of the console group (one per event loop: Daphne runs one; tests run one per test)."""
    loop = asyncio.get_running_loop()
    if loop not in _console:
        _console[loop] = GroupFanout(CONSOLE_GROUP)
    return _console[loop]
