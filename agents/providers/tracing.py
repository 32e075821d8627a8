"""A model call as an OpenTelemetry span (GenAI semantic conventions): operation `chat`, the provider and model, token
usage, finish reasons; the prompt and the answer only with TOOLHUB_TRACE_CONTENT (toolhub/tracing.py).

`traced` wraps a provider's stream: the span is current only while the provider makes its next chunk (so the HTTP
call to the model, instrumented, is its child), never while the caller handles a chunk. Usage is what the server
reported (`report_usage`), else toolhub's own count of the prompt and the answer (`toolhub.usage.estimated`).
While traces are off the stream passes through untouched. Never changes a chunk and never raises for a span.
"""

import json
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from catalog.models.tokens import count_tokens
from toolhub.tracing import content_recorded, tracer

from .base import ModelChunk, ToolCall

INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"


def traced(
    chunks: Iterator[ModelChunk], *, provider: str, model: str, messages: list[dict], tools: list[dict],
    server: str = "", port: int | None = None,
) -> Iterator[ModelChunk]:  # fmt: skip
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    if server:
        attributes["server.address"] = server
    if port:
        attributes["server.port"] = port
    span = tracer().start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)
    if not span.is_recording():
        yield from chunks
        return
    content, finish = "", None
    calls: tuple[ToolCall, ...] = ()
    try:
        while True:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                chunk = next(chunks, None)
            if chunk is None:
                break
            content += chunk.content
            calls = chunk.tool_calls or calls
            finish = chunk.finish_reason or finish
            yield chunk
    except Exception as exc:
        span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(StatusCode.ERROR, str(exc))
        raise
    finally:
        _record_answer(span, content, calls, finish, messages, tools)
        span.end()


def report_usage(input_tokens: int | None, output_tokens: int | None) -> None:
    """The server's own token counts for the model call being traced (call while making a chunk)."""
    span = trace.get_current_span()
    if span.is_recording() and input_tokens is not None and output_tokens is not None:
        span.set_attributes({INPUT_TOKENS: input_tokens, OUTPUT_TOKENS: output_tokens})


def _record_answer(span, content: str, calls, finish, messages: list[dict], tools: list[dict]) -> None:
    if finish:
        span.set_attribute("gen_ai.response.finish_reasons", [finish])
    if INPUT_TOKENS not in (getattr(span, "attributes", None) or {}):
        # Counted message by message and schema by schema: a step repeats the earlier steps' messages and the same
        # schemas, whose counts catalog.models.tokens remembers (the whole prompt as one text never repeats).
        sent = sum(count_tokens(json.dumps(part, ensure_ascii=False, default=str)) for part in (*messages, *tools))
        answer = content + "".join(call.name + call.arguments for call in calls)
        span.set_attributes({INPUT_TOKENS: sent, OUTPUT_TOKENS: count_tokens(answer),
                             "toolhub.usage.estimated": True})  # fmt: skip
    if content_recorded():
        span.set_attribute("gen_ai.input.messages", json.dumps(input_messages(messages), ensure_ascii=False))
        output = {"role": "assistant", "parts": _parts(content, calls), "finish_reason": finish or ""}
        span.set_attribute("gen_ai.output.messages", json.dumps([output], ensure_ascii=False))


def input_messages(messages: list[dict]) -> list[dict]:
    """OpenAI-shaped messages as the GenAI conventions' messages: a role and its parts."""
    converted = []
    for message in messages:
        if message.get("role") == "tool":
            parts = [{"type": "tool_call_response", "id": message.get("tool_call_id", ""),
                      "response": message.get("content") or ""}]  # fmt: skip
        else:
            calls = [{"type": "tool_call", "id": call.get("id", ""), "name": call["function"]["name"],
                      "arguments": call["function"].get("arguments", "")}
                     for call in message.get("tool_calls") or []]  # fmt: skip
            text = message.get("content")
            parts = ([{"type": "text", "content": text}] if text else []) + calls
        converted.append({"role": message.get("role", ""), "parts": parts})
    return converted


def _parts(content: str, calls) -> list[dict]:
    parts = [{"type": "text", "content": content}] if content else []
    return parts + [{"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
                    for call in calls]  # fmt: skip
