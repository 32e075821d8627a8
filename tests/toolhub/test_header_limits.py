"""Daphne's HTTP parser answers a request line or headers over its limits (toolhub.header_limits), driven with the
bytes a client sends: Daphne's own factory builds the connection, a string transport stands for the socket.
tests/integration/test_header_limits.py sends the same through a real Daphne and HAProxy."""

import pytest
from daphne.http_protocol import HTTPFactory
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from toolhub import header_limits


class Socket(StringTransport):
    """A TCP socket's transport: what was written, whether the write side (FIN) or all of it was closed."""

    write_closed = aborted = False

    def loseWriteConnection(self):
        self.write_closed = True

    def abortConnection(self):
        self.aborted = True
        super().abortConnection()


class FakeServer:
    """What Daphne's requests call on their server before the application is involved."""

    def protocol_connected(self, protocol):
        pass

    def protocol_disconnected(self, protocol):
        pass


@pytest.fixture
def connect(monkeypatch):
    monkeypatch.setattr(HTTPFactory, "protocol", HTTPFactory.protocol)  # restored after the test
    header_limits.install()
    clock = Clock()

    def connect():
        factory = HTTPFactory(FakeServer())
        protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1234))
        protocol.callLater = clock.callLater
        socket = Socket()
        protocol.makeConnection(socket)
        return protocol, socket

    connect.clock = clock
    return connect


def send(protocol, data: bytes, chunk: int = 65536) -> None:
    """As the bytes arrive from a socket: in chunks."""
    for start in range(0, len(data), chunk):
        protocol.dataReceived(data[start : start + chunk])


def status_line(socket) -> bytes:
    return socket.value().split(b"\r\n", 1)[0]


HEAD = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.mark.parametrize(
    "request_bytes,status",
    [
        (HEAD + b"Authorization: Bearer " + b"a" * 65536 + b"\r\n\r\n", b"431"),
        (HEAD + b"Cookie: x=" + b"a" * 102400 + b"\r\n\r\n", b"431"),
        (HEAD + b"".join(b"X-H%d: %s\r\n" % (i, b"a" * 1000) for i in range(20)) + b"\r\n", b"431"),
        (HEAD + b"".join(b"X-H%d: a\r\n" % i for i in range(600)) + b"\r\n", b"431"),
        (b"GET /?q=" + b"a" * 20000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"414"),
        (b"NOT HTTP\r\n\r\n", b"400"),
        (HEAD + b"no colon here\r\n\r\n", b"400"),
    ],
    ids=["authorization-64KB", "cookie-100KB", "headers-20KB", "600-fields", "request-line-20KB", "garbage", "field"],
)
def test_a_request_over_the_limits_is_answered_then_closed(connect, request_bytes, status):
    protocol, socket = connect()

    send(protocol, request_bytes)

    answer = socket.value()
    assert status_line(socket) == b"HTTP/1.1 " + status + b" " + header_limits.ANSWERS[int(status)][0]
    head, body = answer.split(b"\r\n\r\n", 1)
    assert b"Connection: close" in head and b"Content-Type: text/plain; charset=utf-8" in head
    assert body == header_limits.ANSWERS[int(status)][1] and b"Content-Length: %d" % len(body) in head
    assert socket.write_closed


def test_a_64kb_header_in_small_chunks_is_answered_once(connect):
    protocol, socket = connect()

    send(protocol, HEAD + b"Authorization: Bearer " + b"a" * 65536 + b"\r\n\r\n", chunk=1024)

    assert socket.value().count(b"HTTP/1.1 ") == 1 and status_line(socket).startswith(b"HTTP/1.1 431")


def test_what_the_client_sends_after_the_answer_is_dropped_and_the_socket_closed_after_the_linger(connect):
    protocol, socket = connect()
    send(protocol, HEAD + b"X-Long: " + b"a" * 20000)
    answered = socket.value()

    send(protocol, b"a" * 100_000 + b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert socket.value() == answered and not socket.aborted

    connect.clock.advance(header_limits.LINGER_SECONDS)
    assert socket.aborted


def test_a_request_within_the_limits_is_not_answered_by_the_parser(connect):
    protocol, socket = connect()

    # Headers just under the limit, and a body still to come: the request waits for it, nothing is written.
    fields = b"X-Big: " + b"a" * (header_limits.HEAD_BYTES - 200) + b"\r\n"
    send(protocol, b"POST /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"Content-Length: 10\r\n\r\n")

    assert socket.value() == b"" and not socket.write_closed and not socket.disconnecting


def test_a_form_body_is_left_to_the_application_unparsed(connect, monkeypatch):
    """Daphne hands the body on as bytes; Twisted's own parse of form bodies into request.args is not done."""
    from daphne.http_protocol import WebRequest

    seen = []
    monkeypatch.setattr(WebRequest, "process", lambda request: seen.append((request.args, request.content.read())))
    protocol, socket = connect()

    body = b"a=1&b=2"
    send(protocol, b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip

    assert seen == [({}, body)]
