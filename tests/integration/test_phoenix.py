"""Traces into a real Arize Phoenix, as a deployment points toolhub at one (docs/operations/monitoring.md): a /v1
turn through Daphne and a prefork Celery worker, with a caller's `traceparent`, is read back from Phoenix's REST API
whole, in the caller's trace, with the GenAI attributes Phoenix shows (model, token usage, tool name) and no message
content by default."""

import json
import secrets

import openai
import pytest

from agents.access.api_keys import create_api_key
from demo.catalog import load_demo_catalog
from tests.support.builders import make_user
from tests.support.phoenix import phoenix_server
from tests.support.servers import celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PROJECT = "toolhub"  # Phoenix's project for the spans: the resource's openinference.project.name
MODEL = "builtin-offline-rule-based"
# Attributes that carry message contents: toolhub's (only with TOOLHUB_TRACE_CONTENT=1) and those Phoenix would derive.
CONTENT = (
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "toolhub.steward.request", "input.value", "output.value", "llm.input_messages", "llm.output_messages",
)  # fmt: skip


def whole(spans: list[dict], caller_span: str) -> bool:
    """The request's span (the caller's child), the task's, the turn's and everything the turn does."""
    names = {span["name"] for span in spans}
    return (
        {"invoke_agent toolhub", "steward", f"chat {MODEL}", "execute_tool calculate"} <= names
        and {"apply_async/agents.tasks.run_turn", "run/agents.tasks.run_turn"} <= names
        and any(span["parent_id"] == caller_span for span in spans)
    )  # fmt: skip


def test_phoenix_stores_a_turn_whole_in_the_callers_trace():
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    with phoenix_server() as phoenix:  # it starts while the rest does
        load_demo_catalog()
        _, key = create_api_key(user=make_user(), name="traced")
        env = database_env(OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.url, OTEL_BSP_SCHEDULE_DELAY="200",
                           OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={PROJECT}")  # fmt: skip
        with celery_worker(env, app, pool="prefork", concurrency=1), daphne(env) as base:
            phoenix.wait_until_ready()
            client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
            answer = client.chat.completions.create(
                model="toolhub", messages=[{"role": "user", "content": "what is 12 * 7?"}],
                extra_headers={"traceparent": f"00-{trace_id}-{caller_span}-01"},
            )  # fmt: skip
            assert "84" in answer.choices[0].message.content
            spans = phoenix.wait_for_spans(PROJECT, trace_id, lambda spans: whole(spans, caller_span), seconds=60)

    assert {span["context"]["trace_id"] for span in spans} == {trace_id}
    by_id = {span["context"]["span_id"]: span for span in spans}
    request = next(span for span in spans if span["parent_id"] == caller_span)
    assert request["name"] == "POST /v1/chat/completions"  # Daphne's span, a child of the caller's
    turn = next(span for span in spans if span["name"] == "invoke_agent toolhub")
    steward = next(span for span in spans if span["name"] == "steward")
    tool = next(span for span in spans if span["name"] == "execute_tool calculate")
    models = [span for span in spans if span["name"] == f"chat {MODEL}"]

    # The turn's span descends from the request's through the task's publish (Daphne) and run (the pool process).
    ancestors, at = [], turn
    while at["parent_id"] in by_id:
        at = by_id[at["parent_id"]]
        ancestors.append(at["name"])
    assert ancestors[0] == "run/agents.tasks.run_turn" and ancestors[-1] == request["name"]
    assert "apply_async/agents.tasks.run_turn" in ancestors
    assert {span["parent_id"] for span in (steward, tool, *models)} == {turn["context"]["span_id"]}

    # The GenAI attributes as sent, and what Phoenix made of them (its span kinds and token counts, which its UI shows).
    assert turn["span_kind"] == "AGENT"
    assert turn["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert turn["attributes"]["toolhub.turn.status"] == "done"
    assert steward["attributes"]["toolhub.routing.recommended_tools"] == ["calculate"]
    for model in models:
        attributes = model["attributes"]
        assert model["span_kind"] == "LLM"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == attributes["llm.model_name"] == MODEL
        assert attributes["gen_ai.usage.input_tokens"] == attributes["llm.token_count.prompt"] > 0
        assert attributes["gen_ai.usage.output_tokens"] == attributes["llm.token_count.completion"] > 0
    assert tool["span_kind"] == "TOOL"
    assert tool["attributes"]["gen_ai.tool.name"] == tool["attributes"]["tool.name"] == "calculate"
    assert tool["attributes"]["toolhub.tool.outcome"] == "ok"

    # No message content by default (TOOLHUB_TRACE_CONTENT): neither as sent nor as Phoenix's input/output values.
    assert not [key for span in spans for key in span["attributes"] if key.startswith(CONTENT)]
    assert "12 * 7" not in json.dumps(spans)
