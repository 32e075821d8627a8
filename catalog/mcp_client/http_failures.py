"""Why a streamable HTTP MCP server could not be reached, in words an admin can act on.

The MCP SDK reports any refused request as "Server returned an error response"; the HTTP answer itself (401, 403,
404, 5xx, and what WWW-Authenticate asked for) is recorded here by an httpx response hook and turned into the
message the server page and the logs show (for an OAuth server: connect it on its page, or the scope its token
lacks). Never sends anything and never shows a header's value that toolhub
sent (a token stays out of messages); the server's WWW-Authenticate challenge is shown, cut to a line.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field

from catalog.mcp_oauth.auth import NeedsConnecting
from catalog.mcp_oauth.http import TooLarge

_CHALLENGE_CHARS = 300


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str
    challenge: str  # the WWW-Authenticate header, if any


@dataclass
class HttpAnswers:
    """The refusals (status >= 400) a connection's HTTP client met, in order; `hook` is its response event hook."""

    refusals: list[Refusal] = field(default_factory=list)

    async def hook(self, response) -> None:
        if response.status_code >= 400:
            challenge = " ".join(response.headers.get("www-authenticate", "").split())[:_CHALLENGE_CHARS]
            self.refusals.append(Refusal(response.status_code, response.reason_phrase or "", challenge))


def describe(label: str, url: str, answers: HttpAnswers, *, sends_authorization: bool, exc: BaseException,
             oauth: bool = False) -> str:  # fmt: skip
    """What went wrong connecting to `url`, or "" when nothing here explains it (the caller says it its way).
    `oauth`: toolhub signs in to this server with OAuth (catalog.mcp_oauth), whose refusals say to connect it."""
    cause = _root(exc)
    if oauth and answers.refusals and answers.refusals[-1].status in (401, 403):
        return _oauth_refusal(label, url, answers.refusals[-1], cause)
    if isinstance(cause, NeedsConnecting):
        return str(cause)
    if answers.refusals:
        return _refusal(label, url, answers.refusals[-1], sends_authorization=sends_authorization)
    if isinstance(cause, ssl.SSLError):
        return f"{label}: TLS with {url} failed ({cause.reason or cause}). Check the certificate and the URL's scheme."
    name = type(cause).__name__
    text = str(cause)
    if name == "ConnectError" or isinstance(cause, ConnectionRefusedError):
        if "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
            return f"{label}: the host of {url} could not be resolved (DNS): {text}."
        return f"{label}: nothing answered at {url} ({text or 'connection refused'})."
    return ""


def _refusal(label: str, url: str, refusal: Refusal, *, sends_authorization: bool) -> str:
    answered = f"{label}: {url} answered {refusal.status} {refusal.reason}".rstrip()
    challenge = f" (WWW-Authenticate: {refusal.challenge})" if refusal.challenge else ""
    if refusal.status == 401:
        advice = (
            "The Authorization header in this server's headers was refused: check or renew the token."
            if sends_authorization
            else "toolhub sent no credentials: add an Authorization header (e.g. Bearer <token>) to this server's "
            "headers."
        )
        if "resource_metadata" in refusal.challenge or "Bearer" in refusal.challenge:
            advice += " This server needs OAuth: choose OAuth on its page (Edit), then connect it there."
        return f"{answered}{challenge}. {advice}"
    if refusal.status == 403:
        scope = _challenged_scope(refusal)
        if scope:
            return f"{answered}{challenge}. The credentials were accepted but lack the scope {scope}."
        return f"{answered}{challenge}. The credentials were accepted but may not use this endpoint (scope or role)."
    if refusal.status in (404, 405):
        return f"{answered}. Is this the server's MCP endpoint (often ending in /mcp)?"
    if refusal.status >= 500:
        return f"{answered}: the server failed; its own logs say why."
    return f"{answered}{challenge}."


def _challenged_scope(refusal: Refusal) -> str:
    """The scope a 403 challenge says is missing (RFC 6750 insufficient_scope), or ""."""
    if "insufficient_scope" not in refusal.challenge:
        return ""
    match = re.search(r'scope="([^"]*)"', refusal.challenge) or re.search(r"scope=([^\s,]+)", refusal.challenge)
    return match.group(1) if match else ""


def _oauth_refusal(label: str, url: str, refusal: Refusal, cause: BaseException) -> str:
    answered = f"{label}: {url} answered {refusal.status} {refusal.reason}".rstrip()
    challenge = f" (WWW-Authenticate: {refusal.challenge})" if refusal.challenge else ""
    if refusal.status == 403:
        scope = _challenged_scope(refusal)
        if scope:
            return (f"{answered}{challenge}. toolhub's OAuth token lacks the scope {scope}: add it to the server's "
                    "OAuth scopes on its page (Edit) and connect it again.")  # fmt: skip
        return f"{answered}{challenge}. toolhub's OAuth token was accepted but may not use this endpoint."
    if isinstance(cause, NeedsConnecting):
        return f"{cause} ({url} answered {refusal.status}{challenge})"
    why = f" Signing in again failed: {cause}" if isinstance(cause, TooLarge) else ""
    return f"{answered}{challenge}. This server needs OAuth: connect it (again) on its page.{why}"


def _root(exc: BaseException) -> BaseException:
    """The innermost cause, through exception groups (the SDK's task groups) and __cause__/__context__ chains."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        elif exc.__cause__ is not None:
            exc = exc.__cause__
        elif exc.__context__ is not None and not exc.__suppress_context__:
            exc = exc.__context__
        else:
            break
    return exc
