"""Shows each request's times in its viewer's zone (zones.py: saved, else the browser's, else the server's).

After AuthenticationMiddleware (it reads request.user). The zone is active only while the request is handled
(timezone.override), and `request.time_zone` says which it is and where it came from. A turn that eager Celery
runs inside the request sets its own (agents/tasks.py): turns read the clock in the server's zone wherever they run.
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from .zones import zone_for


class TimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = zone_for(getattr(request, "user", None), request.COOKIES)
        request.time_zone = zone  # type: ignore[attr-defined]
        with timezone.override(zone.name):
            return self.get_response(request)
