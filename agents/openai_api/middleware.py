"""Every answer on /v1 is OpenAI-style JSON: {"error": {"message", "type", "param", "code"}}.

The API views answer their own errors (agents.openai_api.views.ApiError); this middleware
covers what never reaches them: unknown /v1 paths (404), methods a view does
not take (405), and unhandled exceptions (500, logged, never a traceback or
Django's debug page). It must never rewrite a JSON or streaming answer.
"""

import logging
from http import HTTPStatus

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, JsonResponse

API_PREFIX = "/v1/"
HANDLED_BY_DJANGO = (Http404, PermissionDenied, BadRequest, SuspiciousOperation)
logger = logging.getLogger(__name__)

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", None),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIX) or path == API_PREFIX.rstrip("/")


def api_error(status: int, message: str, *, type: str | None = None, param=None, code=None) -> JsonResponse:
    default_type, default_code = ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    error = {"message": message, "type": type or default_type, "param": param, "code": code or default_code}
    return JsonResponse({"error": error}, status=status)


def _message(request, status: int) -> str:
    if status == 404:
        return f"Unknown API path {request.path!r}."
    if status == 405:
        return f"{request.method} is not allowed on {request.path}."
    if status >= 500:
        return "The server failed to answer this request; it is logged. Try again later."
    return HTTPStatus(status).phrase + "."


class ApiErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not is_api_path(request.path) or response.status_code < 400 or response.streaming:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        replaced = api_error(response.status_code, _message(request, response.status_code))
        for header in ("Allow", "Retry-After"):
            if header in response:
                replaced[header] = response[header]
        return replaced

    def process_exception(self, request, exception):
        # Django answers these with a 4xx itself; __call__ then turns that answer into JSON.
        if not is_api_path(request.path) or isinstance(exception, HANDLED_BY_DJANGO):
            return None
        logger.exception("Unhandled error on %s %s", request.method, request.path, exc_info=exception)
        return api_error(500, _message(request, 500), type="server_error", code="internal_error")
