"""Traces (toolhub/tracing.py): off unless an OTLP endpoint is configured, a turn's spans with the GenAI attributes,
message contents only with TOOLHUB_TRACE_CONTENT, and a collector that does not listen never holding a turn."""

import json
import os
import socket
import subprocess

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents.models import Conversation, Turn
from agents.tasks import run_turn
from agents.turns.start import create_turn
from tests.support import forkserver
from tests.support.builders import make_user
from tests.support.servers import ROOT

PROBE = """
import json, sys, threading, django
django.setup()
from django.conf import settings
from opentelemetry import trace
from toolhub import tracing
provider = trace.get_tracer_provider()
print(json.dumps({
    "enabled": tracing.enabled(),
    # (redis imports the SDK's metrics when it is installed: only the trace SDK, exporter and instrumentations count)
    "imported": sorted(name for name in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http",
                                         "opentelemetry.instrumentation.django", "opentelemetry.instrumentation.celery")
                       if name in sys.modules),
    "threads": sorted(thread.name for thread in threading.enumerate() if thread.name.startswith("Otel")),
    "provider": type(provider).__name__,
    "service": provider.resource.attributes.get("service.name") if tracing.enabled() else "",
    "middleware": settings.MIDDLEWARE[0],
    "sql_spans": "opentelemetry.instrumentation.psycopg" in sys.modules and sys.modules[
        "opentelemetry.instrumentation.psycopg"].PsycopgInstrumentor().is_instrumented_by_opentelemetry,
}))
"""


def probe(**otel) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | otel
    env["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    result = subprocess.run(forkserver.command(["-c", PROBE]), cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def closed_port() -> int:
    """A port nothing listens on (bound, then closed): a collector that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_traces_are_off_without_an_otlp_endpoint():
    seen = probe()
    assert seen["enabled"] is False
    assert seen["imported"] == []  # no trace SDK, exporter or instrumentation
    assert seen["threads"] == []
    assert seen["provider"] == "ProxyTracerProvider"
    assert "opentelemetry" not in seen["middleware"]


def test_an_otlp_endpoint_turns_traces_on_with_the_service_named_toolhub():
    seen = probe(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{closed_port()}")
    assert seen["enabled"] is True
    assert seen["provider"] == "TracerProvider"
    assert seen["threads"] == ["OtelBatchSpanRecordProcessor"]
    assert seen["service"] == "toolhub"
    assert seen["middleware"].startswith("opentelemetry.instrumentation.django")
    assert seen["sql_spans"] is False  # a span per query only when asked for


def test_toolhub_trace_sql_adds_a_span_per_query():
    seen = probe(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{closed_port()}", TOOLHUB_TRACE_SQL="1")
    assert seen["enabled"] is True and seen["sql_spans"] is True


def test_otel_service_name_and_sdk_disabled_are_honoured():
    endpoint = f"http://127.0.0.1:{closed_port()}"
    assert probe(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint, OTEL_SERVICE_NAME="gateway")["service"] == "gateway"
    assert probe(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SDK_DISABLED="true")["enabled"] is False


@pytest.fixture
def spans(monkeypatch):
    """toolhub's spans in memory (the SDK's exporter for tests), and a real OTLP exporter to a collector that is down
    beside it: the turn must not notice."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{closed_port()}/v1/traces",
                                                                    timeout=0.2)))  # fmt: skip
    monkeypatch.setattr(trace, "get_tracer", lambda *args, tracer_provider=None, **kwargs: provider.get_tracer(
        *args, **kwargs))  # fmt: skip
    memory.provider = provider
    yield memory
    provider.shutdown()  # its exporter gives up on the collector (timeout 0.2 s) before the test's output closes


@pytest.fixture
def conversation(demo_catalog):
    return Conversation.objects.create(owner=make_user())


def a_turn(conversation, text="what is 12 * 7?") -> Turn:
    turn = create_turn(conversation, text)
    run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def by_name(memory) -> dict:
    return {span.name: span for span in memory.get_finished_spans()}


@pytest.mark.django_db
def test_a_turn_is_a_trace_of_the_steward_the_model_and_the_tool(spans, conversation):
    turn = a_turn(conversation)
    assert turn.status == Turn.Status.DONE  # the collector is down: the turn did not notice
    named = by_name(spans)
    root = named["invoke_agent toolhub"]
    steward, tool = named["steward"], named["execute_tool calculate"]
    models = [span for span in spans.get_finished_spans() if span.name.startswith("chat ")]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["toolhub.turn.id"] == turn.id
    assert root.attributes["toolhub.turn.status"] == "done"
    assert {span.parent.span_id for span in (steward, tool, *models)} == {root.context.span_id}
    assert {span.context.trace_id for span in spans.get_finished_spans()} == {root.context.trace_id}
    assert steward.attributes["toolhub.routing.recommended_tools"] == ("calculate",)
    assert {"toolhub.routing.action", "toolhub.routing.domains", "toolhub.routing.confidence",
            "toolhub.routing.phase"} <= set(steward.attributes)  # fmt: skip
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "calculate"
    assert tool.attributes["toolhub.tool.outcome"] == "ok"
    assert len(models) == 2  # the call, then the answer
    first, last = models
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "builtin-offline-rule-based"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert last.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert first.attributes["gen_ai.usage.input_tokens"] > 0 and last.attributes["gen_ai.usage.output_tokens"] > 0


def recorded_text(memory) -> str:
    return json.dumps([dict(span.attributes) for span in memory.get_finished_spans()], default=str)


@pytest.mark.django_db
def test_message_contents_stay_out_of_spans_by_default(spans, conversation):
    a_turn(conversation)
    named = by_name(spans)
    assert "12 * 7" not in recorded_text(spans)
    assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & set(
        named["execute_tool calculate"].attributes
    )
    assert "toolhub.steward.request" not in named["steward"].attributes
    assert not any("gen_ai.input.messages" in span.attributes for span in spans.get_finished_spans())


@pytest.mark.django_db
def test_an_admin_may_record_message_contents(spans, conversation, settings):
    settings.TOOLHUB_TRACE_CONTENT = True
    a_turn(conversation)
    named = by_name(spans)
    tool = named["execute_tool calculate"]
    assert "12" in tool.attributes["gen_ai.tool.call.arguments"] and "84" in tool.attributes["gen_ai.tool.call.result"]
    model = [span for span in spans.get_finished_spans() if span.name.startswith("chat ")][-1]
    assert "12 * 7" in model.attributes["gen_ai.input.messages"]
    assert "84" in model.attributes["gen_ai.output.messages"]
    assert named["steward"].attributes["toolhub.steward.request"] == "what is 12 * 7?"


@pytest.mark.django_db
def test_a_real_models_call_is_a_chat_span_over_the_http_call_to_it(spans, demo_catalog, settings):
    """An OpenAI-compatible upstream (tests/support/scripted_openai.py): the chat span names its model and server,
    and the instrumented HTTP call to it (which carries the trace on) is its child."""
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor

    from tests.support.scripted_openai import ScriptedOpenAI

    settings.TOOLHUB_MODEL_RETRIES = 0
    instrumentor = HTTPX2ClientInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        with ScriptedOpenAI() as model:
            settings.TOOLHUB_MODEL_PROVIDER, settings.TOOLHUB_MODEL_BASE_URL = "openai", model.base_url
            settings.TOOLHUB_MODEL = "scripted-model"
            model.steps = [{"content": "Shakespeare."}]
            turn = a_turn(Conversation.objects.create(owner=make_user()), "Who wrote Hamlet?")
    finally:
        instrumentor.uninstrument()
    assert turn.status == Turn.Status.DONE
    chat = by_name(spans)["chat scripted-model"]
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["server.address"] == "127.0.0.1"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    calls = [span for span in spans.get_finished_spans() if span.parent and span.parent.span_id == chat.context.span_id]
    # (the old HTTP conventions' name until OTEL_SEMCONV_STABILITY_OPT_IN=http)
    assert [span.attributes.get("http.request.method", span.attributes.get("http.method")) for span in calls] == [
        "POST"
    ]
