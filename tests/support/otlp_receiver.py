"""A real OTLP/HTTP trace receiver for tests: POST /v1/traces with an ExportTraceServiceRequest (protobuf, as the
SDK's exporter sends it), decoded with opentelemetry-proto into plain span records the test reads.

    with otlp_receiver() as receiver:      # receiver.endpoint: what OTEL_EXPORTER_OTLP_ENDPOINT names
        ...
        spans = receiver.wait_for(lambda spans: ..., seconds=30)
"""

import gzip
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # hex, as in a traceparent
    span_id: str
    parent_span_id: str  # "" for a root span
    name: str
    kind: int
    service: str
    attributes: dict = field(default_factory=dict)
    events: tuple = ()  # (name, attributes)
    status_code: int = 0


def any_value(value):
    """An OTLP AnyValue as the Python value it holds (arrays as lists)."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: any_value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    name=span.name,
                    kind=span.kind,
                    service=resource.get("service.name", ""),
                    attributes={kv.key: any_value(kv.value) for kv in span.attributes},
                    events=tuple((event.name, {kv.key: any_value(kv.value) for kv in event.attributes})
                                 for event in span.events),
                    status_code=span.status.code,
                ))  # fmt: skip
    return spans


class OtlpReceiver:
    def __init__(self):
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                spans = decode(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format, *args):  # quiet: the test reads the spans, not the access log
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, condition, *, seconds: float = 30) -> list[ReceivedSpan]:
        """The spans received once `condition(spans)` holds; AssertionError with what came when it never does."""
        deadline = time.monotonic() + seconds
        while True:
            spans = self.received()
            if condition(spans):
                return spans
            assert time.monotonic() < deadline, f"spans received: {sorted({s.name for s in spans})}"
            time.sleep(0.2)


@contextmanager
def otlp_receiver():
    receiver = OtlpReceiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True, name="otlp-receiver")
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
