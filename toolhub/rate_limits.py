"""Requests per minute per API key, per user and per login client: fixed one-minute windows counted in Django's cache;
and failed logins per username, with a wait that doubles past a threshold.

The cache is Redis on the scaled path (one count across every Daphne process) and
the process's memory on the embedded default (settings.CACHES). A request over a
limit is refused before it does any work, with the seconds until it may come
again (the caller's Retry-After). A limit of 0 turns that count off. Never sleeps or
queues; a cache that cannot be reached lets requests through (logged), so a
Redis fault never turns into refusing everyone. The client's address is
toolhub.client_address's, never a header taken on its own.
"""

import functools
import hashlib
import logging
import math
import time
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.shortcuts import render

from toolhub.client_address import client_address

WINDOW_SECONDS = 60
# A username's failed logins are forgotten after a day without an attempt.
LOGIN_FAILURES_MEMORY = 24 * 3600
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exceeded:
    """A refused request: whose limit (`what`), its size, and the seconds until the window resets."""

    what: str
    limit: int
    retry_after: int

    @property
    def message(self) -> str:
        return (f"Rate limit reached: this {self.what} may make {self.limit} requests per minute. "
                f"Try again in {self.retry_after} s.")  # fmt: skip

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


def take(bucket: str, *, limit: int, what: str, now: float | None = None) -> Exceeded | None:
    """Count one request against `bucket` in the current window; None while within `limit`, else Exceeded."""
    if limit <= 0:
        return None
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"rate:{bucket}:{window}"
    try:
        cache.add(key, 0, timeout=WINDOW_SECONDS + 5)
        try:
            hits = cache.incr(key)
        except ValueError:  # the key expired between add and incr: this request opens the window
            hits = 1
            cache.set(key, hits, timeout=WINDOW_SECONDS + 5)
    except Exception as error:  # the cache's own errors (redis-py's, say) have no common base class
        logger.warning("Rate limit count for %s failed (%s); the request is let through", bucket, error)
        return None
    if hits <= limit:
        return None
    return Exceeded(what, limit, max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)))


def api_request(api_key) -> Exceeded | None:
    """Count a /v1 or /mcp request of `api_key` against the key's limit and its owner's (all their keys)."""
    return take(f"key:{api_key.pk}", limit=settings.TOOLHUB_RATE_LIMIT_PER_MINUTE, what="API key") or take(
        f"user:{api_key.user_id}", limit=settings.TOOLHUB_USER_RATE_LIMIT_PER_MINUTE, what="user"
    )


@dataclass(frozen=True)
class Backoff:
    """A login refused because its username failed too often: the seconds until it may try again."""

    retry_after: int

    @property
    def message(self) -> str:
        return f"Too many failed logins for this username. Try again in {self.retry_after} s."


def account_name(username: str) -> str:
    """A posted username as the login form reads it (stripped, NFKC) and case-folded: the spellings one account
    answers to share one count."""
    return unicodedata.normalize("NFKC", username.strip()).casefold()


def _account_keys(username: str) -> tuple[str, str]:
    """The cache keys of a username's attempt count and its wait; hashed, so no username is stored or too long."""
    digest = hashlib.sha256(account_name(username).encode()).hexdigest()[:32]
    return f"login-account:{digest}:attempts", f"login-account:{digest}:wait"


def account_attempt(username: str, *, now: float | None = None) -> Backoff | None:
    """Count a login attempt for `username` (known or not: the answer never says which); None lets it through.

    The attempt is counted before its password is checked, so concurrent attempts cannot all pass as one. From
    the TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT-th attempt since the last login on, an attempt goes through only when
    it can take the username's wait (an atomic cache.add), and holds it for 1, 2, 4... s (up to
    TOOLHUB_LOGIN_BACKOFF_MAX) against the next; meanwhile attempts are refused and not counted."""
    threshold = settings.TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT
    if threshold <= 0:
        return None
    now = time.time() if now is None else now
    attempts_key, wait_key = _account_keys(username)
    try:
        cache.add(attempts_key, 0, timeout=LOGIN_FAILURES_MEMORY)
        try:
            attempts = cache.incr(attempts_key)
        except ValueError:  # expired between add and incr
            attempts = 1
            cache.set(attempts_key, attempts, timeout=LOGIN_FAILURES_MEMORY)
        cache.touch(attempts_key, LOGIN_FAILURES_MEMORY)
        if attempts < threshold:
            return None
        wait = min(2 ** min(attempts - threshold, 32), max(settings.TOOLHUB_LOGIN_BACKOFF_MAX, 1))
        if cache.add(wait_key, now + wait, timeout=wait):
            return None
        try:
            cache.decr(attempts_key)  # a refused attempt is not counted
        except ValueError:
            pass
        until = cache.get(wait_key)
    except Exception as error:  # the cache's own errors (redis-py's, say) have no common base class
        logger.warning("Login attempt count failed (%s); the attempt is let through", error)
        return None
    return Backoff(max(1, math.ceil((until or now) - now)))


def account_logged_in(username: str) -> None:
    """A login succeeded: the username's count and wait start over."""
    try:
        cache.delete_many(_account_keys(username))
    except Exception as error:
        logger.warning("Login attempt count could not be reset (%s)", error)


def login_attempts(view):
    """Limit a login view's POSTs per client address (TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE) and per username
    (account_attempt): 429 with Retry-After past either, before the password is checked."""

    @functools.wraps(view)
    def limited(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        exceeded = take(f"login:{client_address(request)}", limit=settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE,
                        what="address")  # fmt: skip
        username = request.POST.get("username", "")
        if exceeded is None and account_name(username):
            exceeded = account_attempt(username)
        if exceeded is not None:
            response = render(request, "429.html", {"exceeded": exceeded}, status=429)
            response["Retry-After"] = str(exceeded.retry_after)
            return response
        response = view(request, *args, **kwargs)
        user = request.user  # the view's auth.login() sets it to whoever logged in
        if user.is_authenticated and account_name(user.get_username()) == account_name(username):
            account_logged_in(username)
        return response

    return limited
