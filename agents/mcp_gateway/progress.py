"""What an upstream MCP server says while it runs a tools/call for a /mcp client, passed on to that client.

Progress: when the client's tools/call carries a progressToken, toolhub asks
the server for progress and passes each notice on against the client's own
token. Log messages: those the server sends while this call is the only one in
flight on toolhub's connection to it (a log message names no request, so with
two calls in flight it could be either caller's; it is then only logged here)
go to the client on the call's stream, at or above the level the session set
with logging/setLevel (every level until it sets one; on 2026-07-28 sessions
the request's own log-level opt-in decides, as the SDK defines). Never sends a
notice to a client other than the caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging

import mcp_types as types
from mcp.server.connection import allowed_log_levels

from catalog.mcp_client.client import CallObserver

logger = logging.getLogger(__name__)

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
MAX_SESSIONS = 10_000
_levels: dict[str, str] = {}  # Mcp-Session-Id -> the lowest level it wants (logging/setLevel)


def session_id(ctx) -> str | None:
    request = getattr(ctx, "request", None)
    return request.headers.get("mcp-session-id") if request is not None else None


async def on_set_logging_level(ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    session = session_id(ctx)
    if session:
        _levels.pop(session, None)
        _levels[session] = params.level
        while len(_levels) > MAX_SESSIONS:
            _levels.pop(next(iter(_levels)))
    return types.EmptyResult()


class CallRelay:
    """The observer of one tools/call: sends what the server says to the caller, on the caller's event loop."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.loop = asyncio.get_running_loop()
        self.sent: list[concurrent.futures.Future] = []
        lowest = LEVELS.index(_levels.get(session_id(ctx) or "", "debug"))
        self.levels = frozenset(LEVELS[lowest:]) & allowed_log_levels(ctx.protocol_version, ctx.meta)
        wants_progress = (ctx.meta or {}).get("progress_token") is not None  # the SDK's name for progressToken
        self.observer = CallObserver(on_progress=self._progress if wants_progress else None, on_log=self._log)

    def _send(self, coroutine) -> None:
        """From the client's loop thread: schedule a send on the caller's loop (in order)."""
        try:
            self.sent.append(asyncio.run_coroutine_threadsafe(coroutine, self.loop))
        except RuntimeError:  # the caller's loop is gone
            coroutine.close()

    def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._send(self.ctx.session.report_progress(progress, total, message))

    def _log(self, level: str, data, logger_name: str | None) -> None:
        if level not in self.levels:
            return
        params = types.LoggingMessageNotificationParams(level=level, data=data, logger=logger_name)
        notice = types.LoggingMessageNotification(params=params)
        self._send(self.ctx.session.send_notification(notice, related_request_id=self.ctx.request_id))

    async def announce(self, message: str) -> None:
        """A notice of toolhub's own about the call (it waits for an approval), when the caller asked for progress."""
        try:
            await self.ctx.session.report_progress(0, None, message)  # a no-op without a progressToken
        except Exception as exc:  # the client went away: the answer will not reach it either
            logger.debug("an MCP notice could not be sent: %s", exc)

    async def flush(self) -> None:
        """Wait for what was sent during the call, so it reaches the client before the call's answer."""
        for future in self.sent:
            try:
                await asyncio.wrap_future(future)
            except Exception as exc:  # the client went away: the answer will not reach it either
                logger.debug("an MCP notice could not be passed on: %s", exc)
