"""Daphne's answer to a request whose request line or headers are over Twisted's limits: a short 414 or 431.

Twisted's HTTP parser (twisted.web.http.HTTPChannel, which Daphne serves with) takes a request line and header
lines of at most MAX_LENGTH bytes each, and at most HEAD_BYTES for the request line and all headers together, in at
most maxHeaders header fields. Left alone it drops the connection without a word when one line is too long (a 64 KB
Authorization header or a 100 KB Cookie) and answers a bare 400 with no body to the others. Here every such request
is answered, then the connection is closed:

- a request line over the limit: 414 URI Too Long;
- a header line, the head as a whole or the count of fields over the limit: 431 Request Header Fields Too Large;
- anything else Twisted refuses (a malformed request line, header or chunked body): 400 Bad Request;

each with a one-line text/plain body. The answer is written, then the write side closed (FIN); what the client
still sends is read and dropped for up to LINGER_SECONDS, so the answer is not lost to a reset while a client is
still sending a long header. `install()` makes Daphne's HTTP factory build these channels (toolhub.asgi calls it);
it never changes the limits themselves and never sees a request that passes them.

The requests these channels build leave a POST body as bytes: Twisted would otherwise parse every form body
(urlencoded or multipart/form-data, judged by reading each POST's Content-Type through the email package) into
request.args, which Daphne never reads: it passes the body to the application unparsed, and Django parses forms
itself. That parse was ~4 % of a /mcp call's time on Daphne's thread, and a multipart upload's body was held twice.
"""

import functools

from twisted.web import http

HEAD_BYTES = http.HTTPChannel.totalHeadersSize  # 16384: the request line and every header line, CRLFs not counted
LINE_BYTES = http.HTTPChannel.MAX_LENGTH  # 16384: one line
MAX_FIELDS = http.HTTPChannel.maxHeaders  # 500
LINGER_SECONDS = 2

ANSWERS = {
    400: (b"Bad Request", b"Bad request: this is not a valid HTTP/1.1 request.\n"),
    414: (b"URI Too Long", b"URI too long: the request line may be %d bytes at most.\n" % LINE_BYTES),
    431: (
        b"Request Header Fields Too Large",
        b"Request header fields too large: each line and all headers together may be %d bytes at most, in at most %d "
        b"fields.\n" % (HEAD_BYTES, MAX_FIELDS),
    ),
}


def answer(status: int) -> bytes:
    """The whole HTTP answer for `status`: status line, headers and a one-line body; the connection closes after."""
    reason, body = ANSWERS[status]
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
        b"X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n%s" % (status, reason, len(body), body)
    )


class AnsweringHTTPChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel, but a request over its limits, or malformed, gets an answer before the close."""

    _refused = False
    _request_factory = http.Request

    @property
    def requestFactory(self):
        return self._request_factory

    @requestFactory.setter
    def requestFactory(self, factory):  # Daphne sets its WebRequest on each connection it builds
        self._request_factory = functools.partial(factory, parsePOSTFormSubmission=False)

    def lineLengthExceeded(self, line):
        # Nothing of this request counted yet: the first line is the one over the limit.
        self._refuse(414 if self._receivedHeaderSize == 0 else 431)

    def _respondToBadRequestAndDisconnect(self):
        too_large = self._receivedHeaderSize > self.totalHeadersSize or self._receivedHeaderCount > self.maxHeaders
        self._refuse(431 if too_large else 400)

    def _refuse(self, status: int) -> None:
        if self._refused:
            return
        self._refused = True
        self.setRawMode()  # what is left in the line buffer goes to rawDataReceived, which drops it
        self.setTimeout(None)
        self.transport.write(answer(status))
        close_write = getattr(self.transport, "loseWriteConnection", None)
        if close_write is None:
            self.loseConnection()
            return
        close_write()  # FIN once the answer is out; the client reads it, then closes (connectionLost)
        self._abortingCall = self.callLater(LINGER_SECONDS, self.forceAbortClient)

    def dataReceived(self, data):
        if not self._refused:
            super().dataReceived(data)

    def lineReceived(self, line):
        if not self._refused:
            super().lineReceived(line)

    def rawDataReceived(self, data):
        if not self._refused:
            super().rawDataReceived(data)


def _answering_channel_protocol(factory) -> http._GenericHTTPChannelProtocol:
    return http._GenericHTTPChannelProtocol(AnsweringHTTPChannel())


def install() -> None:
    """Daphne's HTTP connections use AnsweringHTTPChannel from now on (its factory builds one per connection)."""
    from daphne.http_protocol import HTTPFactory

    HTTPFactory.protocol = _answering_channel_protocol
