"""Requests per minute per API key, per user and per login client: fixed one-minute windows counted in Django's cache.

The cache is Redis on the scaled path (one count across every Daphne process) and
the process's memory on the embedded default (settings.CACHES). A request over a
limit is refused before it does any work, with the seconds until its window ends
(the caller's Retry-After). A limit of 0 turns that count off. Never sleeps or
queues; a cache that cannot be reached lets requests through (logged), so a
Redis fault never turns into refusing everyone.
"""

import functools
import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.shortcuts import render

WINDOW_SECONDS = 60
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


def login_attempts(view):
    """Limit a login view's POSTs per client address (TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE): 429 past it."""

    @functools.wraps(view)
    def limited(request, *args, **kwargs):
        if request.method == "POST":
            client = request.META.get("REMOTE_ADDR") or "unknown"
            exceeded = take(f"login:{client}", limit=settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE, what="address")
            if exceeded is not None:
                response = render(request, "429.html", {"exceeded": exceeded}, status=429)
                response["Retry-After"] = str(exceeded.retry_after)
                return response
        return view(request, *args, **kwargs)

    return limited
