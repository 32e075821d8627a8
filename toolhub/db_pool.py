"""When the database pool has no connection to give in time, the answer is 503 with Retry-After, never a 500.

Django's psycopg pool (settings.DATABASES OPTIONS "pool") raises
psycopg_pool.PoolTimeout when every connection stays busy past its timeout;
PostgreSQL itself refuses with "too many clients" when the server is full.
Both mean "busy, try again", so /v1 gets an OpenAI-style error and the
dashboard a short text. Any other database error is left alone.
"""

from django.db import OperationalError
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


BUSY_MESSAGE = "The service is at its database connection limit; retry shortly."


def busy_response(request):
    if is_api_path(request.path):
        response = api_error(503, BUSY_MESSAGE, type="server_error", code="service_unavailable")
    else:
        response = HttpResponse(BUSY_MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class PoolExhaustedMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        return busy_response(request) if is_pool_exhausted(exception) else None
