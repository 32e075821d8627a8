"""When the database is busy or cannot be reached, the answer is 503 with Retry-After, never a 500.

Django's psycopg pool (settings.DATABASES OPTIONS "pool") raises
psycopg_pool.PoolTimeout when every connection stays busy past its timeout;
PostgreSQL itself refuses with "too many clients" when the server is full.
Both mean "busy, try again". A server that is restarting or gone (connection
refused, the connection closed under a query) means "unavailable, try again".
Either way /v1 gets an OpenAI-style error and the dashboard a short text.
Errors of the query itself (a constraint, bad SQL) are left alone.
"""

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse

from agents.openai_api.middleware import api_error, is_api_path

RETRY_AFTER_SECONDS = 2
BUSY_MESSAGES = ("too many clients", "remaining connection slots are reserved", "couldn't get a connection")


def is_pool_exhausted(exception: BaseException) -> bool:
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # SQLite: there is no pool
        PoolTimeout = ()  # noqa: N806
    seen = exception
    while seen is not None:
        if PoolTimeout and isinstance(seen, PoolTimeout):
            return True
        if isinstance(seen, OperationalError) and any(text in str(seen) for text in BUSY_MESSAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_database_unavailable(exception: BaseException) -> bool:
    """The server could not be reached or dropped the connection: not an error of the query."""
    seen = exception
    while seen is not None:
        if isinstance(seen, InterfaceError) or (
            isinstance(seen, OperationalError) and any(text in str(seen).lower() for text in UNAVAILABLE_MESSAGES)
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# What psycopg and PostgreSQL say when the server is down, restarting or closed the connection.
UNAVAILABLE_MESSAGES = (
    "connection refused",
    "server closed the connection",
    "terminating connection",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "consuming input failed",
    "connection is closed",
    "connection failed",
    "connection is lost",
    "could not receive data",
    "could not send data",
    "ssl syscall error",
)
BUSY_MESSAGE = "The service is at its database connection limit; retry shortly."
UNAVAILABLE_MESSAGE = "The service's database is unavailable; retry shortly."


def unavailable_message(exception: BaseException) -> str | None:
    """What to tell a client when `exception` means "busy" or "unavailable, try again"; None for any other error."""
    if is_pool_exhausted(exception):
        return BUSY_MESSAGE
    if is_database_unavailable(exception):
        return UNAVAILABLE_MESSAGE
    return None


def busy_response(request, message: str = BUSY_MESSAGE):
    if is_api_path(request.path):
        response = api_error(503, message, type="server_error", code="service_unavailable")
    else:
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class PoolExhaustedMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        message = unavailable_message(exception)
        return busy_response(request, message) if message else None
