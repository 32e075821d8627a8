"""/ws/approvals/: tells an open approvals inbox when to read itself again, so a new approval shows within a second.

The inbox (templates/agents/approvals.html) stays the one renderer of its rows: this socket sends only the word
"changed" and static/js/console.js turns it into the inbox's htmx refresh (which keeps its rule of never refreshing
under an operator's keyboard or half-typed deny reason). A call waiting for approval is said at once; the events
that may end or decide one (status, done, error) at most once every TRAILING_SECONDS, after the last of a burst.
Policy changes waiting for a second operator are no turn events: the inbox's own slow poll picks them up.
"""

import asyncio

from agents.models import TurnEvent

from .consumers import ConsoleBase

CHANGED = "changed"
TRAILING_SECONDS = 1.0
MAY_END_AN_APPROVAL = frozenset({TurnEvent.Type.STATUS, TurnEvent.Type.DONE, TurnEvent.Type.ERROR})


class ApprovalsConsumer(ConsoleBase):
    """Says "changed" on connect (whatever came between the page's render and the socket) and after each event that
    adds, decides or ends an approval."""

    async def snapshot(self) -> str:
        self.pending: asyncio.TimerHandle | None = None
        return CHANGED

    async def turn_event(self, message):
        kind = message["event"]["type"]
        if kind == TurnEvent.Type.APPROVAL_REQUIRED:
            await self.send(text_data=CHANGED)
        elif kind in MAY_END_AN_APPROVAL and self.pending is None:
            self.pending = asyncio.get_running_loop().call_later(TRAILING_SECONDS, self.say_changed)

    def say_changed(self):
        self.pending = None
        asyncio.ensure_future(self.send(text_data=CHANGED))

    async def disconnect(self, code):
        if getattr(self, "pending", None) is not None:
            self.pending.cancel()
