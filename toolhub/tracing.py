"""OpenTelemetry traces: the SDK set up once per process when an OTLP endpoint is configured, and the few helpers
toolhub's own spans use (the turn, the steward, model calls, tool executions: agents/).

On only when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set (and neither
OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none). Off, nothing of the SDK or the instrumentations is imported:
toolhub's spans go to the API's no-op tracer and cost a function call. On, `setup` (from ToolhubConfig.ready in every
process, and Celery's worker_process_init in a prefork child) installs a TracerProvider whose spans are exported over
OTLP (HTTP/protobuf; OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc when its exporter is installed) by a thread of the
process from a bounded queue (BatchSpanProcessor: OTEL_BSP_MAX_QUEUE_SIZE spans, 2048 by default). A collector that
is down or slow only makes that thread's exports fail: spans past the queue are dropped, a turn never waits.
It instruments Django, the /mcp ASGI app (`asgi_app`), Celery (the task carries the caller's context) and httpx2
(calls to models and upstream MCP servers carry `traceparent`); psycopg (a span per SQL query) only with
TOOLHUB_TRACE_SQL=1.

Message contents (prompts, answers, tool arguments and results) are recorded only with TOOLHUB_TRACE_CONTENT=1
(`content_recorded`). Never raises while a span is recorded and never imports agents or catalog.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

log = logging.getLogger(__name__)

SERVICE_NAME = "toolhub"
TRACER_NAME = "toolhub"
# Requests traced by no one: the balancer's health checks and Prometheus' scrapes (OTEL_PYTHON_ASGI_EXCLUDED_URLS
# replaces the list).
EXCLUDED_URLS = "healthz,metrics"

_lock = threading.Lock()
_processor = None  # the process's _ProcessLocalBatches once set up


def configured() -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def enabled() -> bool:
    """Whether this process exports traces (set up and configured)."""
    return _processor is not None


def setup() -> bool:
    """Install the tracer provider and the instrumentations once per process; again after a fork, the child gets
    its own exporter and thread. False (and nothing imported) when traces are not configured."""
    global _processor
    if not configured():
        return False
    with _lock:
        if _processor is not None:
            _processor.renew_after_fork()
            return True
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SERVICE_NAME}))
        _processor = _ProcessLocalBatches(span_exporter)
        provider.add_span_processor(cast("SpanProcessor", _processor))  # the SDK's interface, without its import
        trace.set_tracer_provider(provider)
        instrument()
    log.info("traces are exported over OTLP (%s)", protocol())
    return True


def protocol() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip().lower()  # fmt: skip


def span_exporter():
    """The OTLP exporter the OTEL_EXPORTER_OTLP_* variables describe (endpoint, headers, timeout, certificates)."""
    if protocol() == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            raise ImproperlyConfigured(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the opentelemetry-exporter-otlp-proto-grpc package, which "
                "toolhub does not install; use http/protobuf (the default) or install it"
            ) from None
        return GrpcExporter()
    if protocol() != "http/protobuf":
        raise ImproperlyConfigured(f"OTLP protocol {protocol()!r} is not supported: use http/protobuf or grpc")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def instrument() -> None:
    """The libraries' own instrumentations: Django (its middleware goes first; so before Django loads it), Celery,
    httpx2, and psycopg when TOOLHUB_TRACE_SQL asks for a span per query."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor

    DjangoInstrumentor().instrument()
    CeleryInstrumentor().instrument()
    HTTPX2ClientInstrumentor().instrument()
    if settings.TOOLHUB_TRACE_SQL:
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        PsycopgInstrumentor().instrument()


def asgi_app(app):
    """`app` under the ASGI instrumentation when traces are on (its span joins an incoming `traceparent` and lasts
    the whole answer, a streamed one included), else `app` itself."""
    if not enabled():
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    # No span per ASGI message: a streamed answer sends one per chunk.
    return OpenTelemetryMiddleware(app, excluded_urls=os.environ.get("OTEL_PYTHON_ASGI_EXCLUDED_URLS", EXCLUDED_URLS),
                                   exclude_spans=["receive", "send"])  # fmt: skip


def tracer() -> trace.Tracer:
    """toolhub's tracer: the no-op one while traces are off."""
    return trace.get_tracer(TRACER_NAME)


def content_recorded() -> bool:
    """Whether spans may carry message contents, tool arguments and results (TOOLHUB_TRACE_CONTENT)."""
    return settings.TOOLHUB_TRACE_CONTENT


def force_flush(timeout_millis: int = 5000) -> bool:
    """Export what is queued now (tests; a process about to exit). True when there was nothing to do."""
    return _processor.force_flush(timeout_millis) if _processor is not None else True


class _ProcessLocalBatches:
    """A BatchSpanProcessor per process: a forked child (a Celery prefork pool process) inherits the parent's,
    whose exporter's connections are the parent's, so its first span makes it one of its own."""

    def __init__(self, make_exporter):
        self._make_exporter = make_exporter
        self._pid = -1
        self._batches = None
        self.renew_after_fork()

    def renew_after_fork(self) -> None:
        if self._pid == os.getpid():
            return
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self._batches = BatchSpanProcessor(self._make_exporter())
        self._pid = os.getpid()

    def on_start(self, span, parent_context=None) -> None:
        pass

    def _on_ending(self, span) -> None:  # the SDK's SpanProcessor hook before a span ends: nothing to do
        pass

    def on_end(self, span) -> None:
        if self._pid != os.getpid():
            with _lock:
                self.renew_after_fork()
        self._batches.on_end(span)

    def shutdown(self) -> None:
        if self._pid == os.getpid():
            self._batches.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batches.force_flush(timeout_millis) if self._pid == os.getpid() else True
