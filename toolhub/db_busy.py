"""503 with Retry-After when the database cannot give a connection in time (pool exhausted, server full).

Each process borrows at most TOOLHUB_DB_POOL_MAX connections (settings); a
request that waited TOOLHUB_DB_POOL_TIMEOUT for one, or that PostgreSQL
refused ("too many clients"), is told to come back, as an OpenAI-style JSON
error under /v1/ and /mcp, as a short page elsewhere. Never hides other errors.
"""

import logging

from django.db import OperationalError
from django.http import HttpResponse, JsonResponse

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 2
BUSY_MESSAGE = "toolhub is busy: no database connection was free in time. Retry after a moment."
JSON_PATHS = ("/v1/", "/mcp")
# What psycopg and PostgreSQL say when there is no connection to be had (PoolTimeout, "too many clients already",
# "remaining connection slots are reserved").
_BUSY_SIGNS = ("couldn't get a connection", "too many clients", "remaining connection slots")


def is_database_busy(exc: BaseException) -> bool:
    if not isinstance(exc, OperationalError):
        return False
    text = f"{exc} {exc.__cause__ or ''}".lower()
    return any(sign in text for sign in _BUSY_SIGNS)


def busy_response(path: str) -> HttpResponse:
    if path.startswith(JSON_PATHS):
        error = {"message": BUSY_MESSAGE, "type": "server_error", "param": None, "code": "database_busy"}
        response = JsonResponse({"error": error}, status=503)
    else:
        response = HttpResponse(BUSY_MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseBusyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not is_database_busy(exception):
            return None
        log.warning("503 for %s: %s", request.path, exception)
        return busy_response(request.path)
