"""Drive toolhub's /mcp ASGI app in-process with raw JSON-RPC over streamable HTTP (no Daphne, no SDK client).

`McpAsgiClient(endpoint, key)` sends one POST per call and reads the whole answer
(the SDK answers a request with a short SSE stream; its events are parsed by `sse_events`,
which tests reading a real server's stream use too).
"""

import asyncio
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

PROTOCOL_VERSION = "2025-06-18"


@dataclass
class McpReply:
    status: int
    headers: dict[str, str]
    messages: list[dict] = field(default_factory=list)  # JSON-RPC messages of the body
    body: bytes = b""

    @property
    def result(self) -> dict | None:
        return next((m["result"] for m in self.messages if "result" in m), None)

    @property
    def error(self) -> dict | None:
        return next((m["error"] for m in self.messages if "error" in m), None)


def sse_events(lines: Iterable[str]) -> Iterator[dict[str, str]]:
    """The SSE events of a body's lines, each a dict of its fields (id, retry, data ...; comments left out)."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            if fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    if fields:
        yield fields


def _messages(content_type: str, body: bytes) -> list[dict]:
    if not body:
        return []
    if content_type.startswith("text/event-stream"):
        events = sse_events(body.decode().splitlines())
        return [json.loads(e["data"]) for e in events if e.get("data")]  # no data: a priming event (2025-11-25)
    if content_type.startswith("application/json"):
        data = json.loads(body)
        return data if isinstance(data, list) else [data]
    return []


async def asgi_call(
    app,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes = b"",
    *,
    until: Callable[[bytes], bool] | None = None,
) -> McpReply:
    """One request; the client stays connected until the answer ends, or disconnects once `until(body so far)`
    holds (a stream that does not end by itself)."""
    sent = []
    delivered = False
    finished = asyncio.Event()

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()  # the client stays connected until the answer is complete
        return {"type": "http.disconnect"}

    def content() -> bytes:
        return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

    async def send(message):
        sent.append(message)
        if message["type"] != "http.response.body":
            return
        if not message.get("more_body", False) or (until is not None and until(content())):
            finished.set()

    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "http_version": "1.1", "method": method, "path": path, "raw_path": path.encode(),
             "headers": raw, "query_string": b"", "scheme": "http", "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 1234)}  # fmt: skip
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    response_headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
    answer = content()
    return McpReply(
        start["status"], response_headers, _messages(response_headers.get("content-type", ""), answer), answer
    )


class McpAsgiClient:
    def __init__(self, app, key: str | None, host: str = "localhost"):
        self.app, self.key, self.host = app, key, host
        self.session_id: str | None = None
        self.protocol_version = PROTOCOL_VERSION
        self._next_id = 0

    def headers(self) -> dict[str, str]:
        headers = {
            "host": self.host,
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": self.protocol_version,
        }
        if self.key:
            headers["authorization"] = f"Bearer {self.key}"
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        return headers

    async def send(self, message: dict) -> McpReply:
        return await asgi_call(self.app, "POST", "/mcp", self.headers(), json.dumps(message).encode())

    async def request(self, method: str, params: dict | None = None) -> McpReply:
        self._next_id += 1
        return await self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})

    async def initialize(self) -> McpReply:
        client = {"name": "test", "version": "1"}
        params = {"protocolVersion": self.protocol_version, "capabilities": {}, "clientInfo": client}
        reply = await self.request("initialize", params)
        if reply.status == 200:
            self.session_id = reply.headers.get("mcp-session-id")
            await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    async def list_tools(self) -> McpReply:
        return await self.request("tools/list")

    async def call_tool(self, name: str, arguments: dict) -> McpReply:
        return await self.request("tools/call", {"name": name, "arguments": arguments})
