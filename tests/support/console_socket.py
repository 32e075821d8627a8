"""A console WebSocket for tests and benchmarks: a minimal RFC 6455 client that records every message it receives."""

import asyncio
import base64
import os
import re
import time
from urllib.parse import urlsplit

# Each live event's fragment starts with this comment (templates/agents/conversation.html, live-event): a frame may
# carry several events (a socket gets what queued for it while it drew the previous one in one frame).
EVENT_MARK = re.compile(r"<!-- event (\d+)/(\d+) -->")


class ConsoleSocket:
    """One console viewer on a minimal RFC 6455 client (asyncio streams): records (receipt time, text) of each message.

    A hand-written client because autobahn's asyncio flavour cannot share a process with Daphne's twisted one.
    """

    def __init__(self):
        self.messages: list[tuple[float, str]] = []
        self.ended = ""  # why reading stopped, if it did

    def events(self, turn_id: int) -> list[tuple[float, int]]:
        """(receipt time, sequence) of each live event of the turn this socket drew, in the order drawn."""
        return [
            (received, int(sequence))
            for received, text in self.messages[1:]
            for turn, sequence in EVENT_MARK.findall(text)
            if int(turn) == turn_id
        ]

    async def open(self, base: str, path: str, session: str) -> "ConsoleSocket":
        url = urlsplit(base)
        self.reader, self.writer = await asyncio.open_connection(url.hostname, url.port)
        key = base64.b64encode(os.urandom(16)).decode()
        self.writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {base}\r\n"
            f"Cookie: sessionid={session}\r\n\r\n".encode()
        )
        status = await self.reader.readline()
        if b" 101 " not in status:
            raise ConnectionError(f"handshake refused: {status!r}")
        self.headers = {}  # of the handshake's answer, names lowercased (a balancer's X-Served-By among them)
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self.task = asyncio.ensure_future(self.read())
        return self

    async def read(self) -> None:
        try:
            await self.read_frames()
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.ended = f"{type(exc).__name__}: {exc}"

    async def read_frames(self) -> None:
        text = b""
        while True:
            head = await self.reader.readexactly(2)
            length = head[1] & 0x7F
            if length == 126:
                length = int.from_bytes(await self.reader.readexactly(2), "big")
            elif length == 127:
                length = int.from_bytes(await self.reader.readexactly(8), "big")
            payload = await self.reader.readexactly(length)
            opcode = head[0] & 0x0F
            if opcode == 0x8:  # close
                self.ended = f"closed by the server: {int.from_bytes(payload[:2], 'big') if payload else ''}"
                return
            if opcode == 0x9:  # Daphne pings every 20 s and drops a socket that never answers
                self.send_frame(0xA, payload)
                continue
            if opcode in (0x1, 0x0):
                text += payload
                if head[0] & 0x80:  # final fragment
                    self.messages.append((time.time(), text.decode()))
                    text = b""

    def send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)  # client frames are masked; payloads here are under 126 bytes
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    async def close(self) -> None:
        self.task.cancel()
        try:
            self.send_frame(0x8, b"")
            await self.writer.drain()
        except OSError:
            pass  # already closed by the server
        self.writer.close()


async def open_socket(base: str, path: str, session: str) -> ConsoleSocket:
    return await asyncio.wait_for(ConsoleSocket().open(base, path, session), 60)
