"""Any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, OpenAI) through the official SDK.

Streams content deltas as they arrive and assembles streamed tool calls
(fragments by index) into whole calls at the end of the step.
"""

from collections.abc import Iterator

import openai
from django.conf import settings

from . import ModelChunk, ModelTimeout, ModelUnavailable, ToolCall, TurnHints

__all__ = ["ModelUnavailable", "OpenAICompatProvider"]


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None):
        self.base_url = base_url or settings.TOOLHUB_MODEL_BASE_URL
        self.model = model or settings.TOOLHUB_MODEL
        self.client = openai.OpenAI(
            base_url=self.base_url,
            # The SDK needs some key; local servers (Ollama, vLLM, llama.cpp) ignore it.
            api_key=(settings.TOOLHUB_MODEL_API_KEY if api_key is None else api_key) or "not-needed",
            timeout=settings.TOOLHUB_MODEL_TIMEOUT,
            max_retries=settings.TOOLHUB_MODEL_RETRIES,
        )
        self.label = f"{self.model} at {self.base_url}"

    def stream(
        self, messages: list[dict], tools: list[dict], *, hints: TurnHints, tool_choice=None, parallel_tool_calls=None
    ) -> Iterator[ModelChunk]:
        request = {"model": self.model, "messages": messages, "stream": True}
        if tools:  # toolhub's and the client's alike; the client's choices pass through as it sent them
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
            if parallel_tool_calls is not None:
                request["parallel_tool_calls"] = parallel_tool_calls
        try:
            response = self.client.chat.completions.create(**request)
            calls: dict[int, dict] = {}
            finish = None
            for chunk in response:
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta and delta.content:
                    yield ModelChunk(content=delta.content)
                for fragment in (delta.tool_calls or []) if delta else []:
                    call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = fragment.id or call["id"]
                    if fragment.function:
                        call["name"] += fragment.function.name or ""
                        call["arguments"] += fragment.function.arguments or ""
                finish = choice.finish_reason or finish
        except openai.APITimeoutError:
            raise ModelTimeout(f"the model at {self.base_url} did not answer in time") from None
        except openai.OpenAIError as exc:
            raise ModelUnavailable(f"the model at {self.base_url} failed: {exc.__class__.__name__}") from None
        tool_calls = tuple(
            ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}")
            for index, call in sorted(calls.items())
        )
        yield ModelChunk(tool_calls=tool_calls, finish_reason=finish or ("tool_calls" if tool_calls else "stop"))
