"""Traces on the scaled path, exported to a real OTLP/HTTP receiver: a caller's `traceparent` on /v1 is joined by
Daphne's request span, carried through the Celery task to the turn in a prefork pool process, and the turn's steward,
model and tool spans carry the GenAI attributes; no message content is recorded by default."""

import json
import secrets

import openai
import pytest

from agents.access.api_keys import create_api_key
from demo.catalog import load_demo_catalog
from tests.support.builders import make_user
from tests.support.otlp_receiver import otlp_receiver
from tests.support.servers import celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_turn_joins_the_callers_trace_across_daphne_and_the_worker():
    load_demo_catalog()
    _, key = create_api_key(user=make_user(), name="traced")
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    with otlp_receiver() as receiver:
        env = database_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="200")
        with celery_worker(env, app, pool="prefork", concurrency=1), daphne(env) as base:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
            stream = client.chat.completions.create(
                model="toolhub", stream=True, messages=[{"role": "user", "content": "what is 12 * 7?"}],
                extra_headers={"traceparent": f"00-{trace_id}-{caller_span}-01"},
            )  # fmt: skip
            assert "84" in "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)

            def whole(spans) -> bool:
                names = {span.name for span in spans if span.trace_id == trace_id}
                return {"invoke_agent toolhub", "steward", "execute_tool calculate"} <= names and any(
                    name.startswith("chat ") for name in names
                ) and any(span.parent_span_id == caller_span for span in spans)  # fmt: skip

            spans = receiver.wait_for(whole, seconds=60)

    ours = [span for span in spans if span.trace_id == trace_id]
    by_id = {span.span_id: span for span in ours}
    request = next(span for span in ours if span.parent_span_id == caller_span)
    assert request.kind == 2  # SERVER: Daphne's span for the caller's request
    turn = next(span for span in ours if span.name == "invoke_agent toolhub")
    steward = next(span for span in ours if span.name == "steward")
    tool = next(span for span in ours if span.name == "execute_tool calculate")
    model = next(span for span in ours if span.name == "chat builtin-offline-rule-based")

    # The turn's span descends from the request's, through the task's publish and run spans.
    ancestors, at = [], turn
    while at.parent_span_id in by_id:
        at = by_id[at.parent_span_id]
        ancestors.append(at.name)
    assert request.name in ancestors and any(name.startswith("run/agents.tasks.run_turn") for name in ancestors)
    assert {steward.parent_span_id, tool.parent_span_id, model.parent_span_id} == {turn.span_id}
    assert {span.service for span in ours} == {"toolhub"}

    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["toolhub.turn.status"] == "done"
    assert steward.attributes["toolhub.routing.recommended_tools"] == ["calculate"]
    assert steward.attributes["toolhub.routing.action"]
    assert {"toolhub.routing.domains", "toolhub.routing.confidence", "toolhub.routing.phase"} <= set(steward.attributes)
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "calculate"
    assert tool.attributes["toolhub.tool.outcome"] == "ok"
    assert model.attributes["gen_ai.operation.name"] == "chat"
    assert model.attributes["gen_ai.request.model"] == "builtin-offline-rule-based"
    assert model.attributes["gen_ai.usage.input_tokens"] > 0
    assert model.attributes["gen_ai.usage.output_tokens"] > 0
    assert model.attributes["gen_ai.response.finish_reasons"] in (["tool_calls"], ["stop"])

    recorded = json.dumps([span.attributes for span in spans] + [span.events for span in spans], default=str)
    assert "12 * 7" not in recorded  # message contents only with TOOLHUB_TRACE_CONTENT
