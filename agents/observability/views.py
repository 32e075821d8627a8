"""GET /metrics: the Prometheus exposition of agents.observability.metrics, for a scraper holding the token.

Off (404, as for any unknown path) until TOOLHUB_METRICS_TOKEN is set; then a scrape sends
`Authorization: Bearer <token>` (Prometheus: `authorization: {credentials: ...}`), and anything else gets 401.
"""

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from . import metrics as toolhub_metrics


class _DatabaseCollector:
    def collect(self):
        return toolhub_metrics.collect()


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(_DatabaseCollector())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.TOOLHUB_METRICS_TOKEN
    if not token:
        raise Http404("metrics are off: set TOOLHUB_METRICS_TOKEN")
    scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(offered.strip().encode(), token.encode()):
        response = HttpResponse("a scrape of /metrics needs Authorization: Bearer <TOOLHUB_METRICS_TOKEN>\n",
                                status=401, content_type="text/plain; charset=utf-8")  # fmt: skip
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    response = HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
