"""Bounded HTTP for the OAuth flow: every answer is read to at most MAX_DOCUMENT_BYTES within a deadline.

An upstream's metadata, registration and token answers are JSON documents of a few KB; a larger one, one that
trickles past the deadline, or one that is not JSON is refused with an OAuthProblem naming the URL, never read
whole or waited on without end. Redirects are not followed (OAuth endpoints answer where their metadata says).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx2

MAX_DOCUMENT_BYTES = 256 * 1024
TIMEOUT_SECONDS = 10.0


class OAuthProblem(Exception):
    """Connecting with OAuth failed; the message says why in words an admin can act on, and holds no token."""


@dataclass(frozen=True)
class Answer:
    url: str
    status: int
    headers: httpx2.Headers
    body: bytes

    @property
    def redirected_to(self) -> str:
        return self.headers.get("location", "") if 300 <= self.status < 400 else ""


def new_client(timeout: float = TIMEOUT_SECONDS) -> httpx2.Client:
    return httpx2.Client(timeout=httpx2.Timeout(timeout), follow_redirects=False)


def send(client: httpx2.Client, request: httpx2.Request, *, what: str, deadline_seconds: float = TIMEOUT_SECONDS,
         limit: int = MAX_DOCUMENT_BYTES) -> Answer:  # fmt: skip
    """Send `request` and read its answer's body, refusing more than `limit` bytes or `deadline_seconds`."""
    url = str(request.url)
    deadline = time.monotonic() + deadline_seconds
    try:
        response = client.send(request, stream=True)
    except httpx2.TimeoutException:
        raise OAuthProblem(f"{what} at {url} did not answer within {deadline_seconds:g} s.") from None
    except httpx2.HTTPError as exc:
        raise OAuthProblem(f"{what} at {url} could not be reached: {type(exc).__name__}: {exc}.") from None
    try:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise OAuthProblem(f"{what} at {url} is {int(declared):,} bytes, more than the {limit:,} toolhub reads.")
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise OAuthProblem(f"{what} at {url} is larger than the {limit:,} bytes toolhub reads; refused.")
            if time.monotonic() > deadline:
                raise OAuthProblem(f"{what} at {url} was not read within {deadline_seconds:g} s; refused.")
    except httpx2.TimeoutException:
        raise OAuthProblem(f"{what} at {url} stopped sending within its answer (timeout).") from None
    except httpx2.HTTPError as exc:
        raise OAuthProblem(f"{what} at {url} failed while answering: {type(exc).__name__}.") from None
    finally:
        response.close()
    return Answer(url, response.status_code, response.headers, bytes(body))


class TooLarge(httpx2.HTTPError):
    """An answer past the limit, while the SDK reads it (its message names the URL)."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, url: str, limit: int):
        self.inner, self.url, self.limit = inner, url, limit

    async def __aiter__(self):
        size = 0
        async for chunk in self.inner:
            size += len(chunk)
            if size > self.limit:
                raise TooLarge(f"The answer of {self.url} is larger than the {self.limit:,} bytes toolhub reads.")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class BoundedOAuthTransport(httpx2.AsyncBaseTransport):
    """A connection's transport that reads at most `limit` bytes of any answer but the MCP endpoint's own: what the
    SDK's OAuth provider fetches at run time (metadata after a 401, token refreshes) stays bounded like `send`."""

    def __init__(self, mcp_url: str, limit: int = MAX_DOCUMENT_BYTES):
        self.mcp_url = httpx2.URL(mcp_url)
        self.limit = limit
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.copy_with(query=None) == self.mcp_url.copy_with(query=None):
            return response
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(stream, str(request.url), self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
