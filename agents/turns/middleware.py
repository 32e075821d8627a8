"""Map workflow errors raised by any view to their HTTP status (409 for a stale version)."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from .workflows import WorkflowError, http_status_for


class WorkflowErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, WorkflowError):
            return None
        status = http_status_for(exception)
        if request.path.startswith("/v1/"):
            error = {
                "message": str(exception),
                "type": "workflow_error",
                "param": None,
                "code": type(exception).__name__,
            }
            return JsonResponse({"error": error}, status=status)
        return HttpResponse(str(exception), status=status, content_type="text/plain; charset=utf-8")
