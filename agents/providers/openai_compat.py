"""Any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, OpenAI) through the official SDK.

Streams content deltas as they arrive and assembles streamed tool calls
(fragments by index) into whole calls at the end of the step.

One call has one deadline, TOOLHUB_MODEL_TIMEOUT seconds from its start, that
its retries share: each attempt may wait only what is left of it (the SDK's
own per-attempt timeout and retries are off). A call is retried (at most
TOOLHUB_MODEL_RETRIES times) only before the model streamed anything, so no
delta is ever sent twice.
"""

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from urllib.parse import urlsplit

import openai
from django.conf import settings

from .base import ModelChunk, ModelTimeout, ModelUnavailable, ToolCall, TurnHints
from .tracing import report_usage, traced

__all__ = ["ModelUnavailable", "OpenAICompatProvider", "sdk_client"]

# A process keeps one SDK client per server, key and default timeout (at most SDK_CLIENTS, the least recently used
# dropped): making one reads the CA bundle into a new SSL context (~20 ms of CPU) and starts an empty connection
# pool, which every turn paid, with a new connection to the model server, while each turn made its own.
SDK_CLIENTS = 16
_sdk_clients: OrderedDict[tuple, openai.OpenAI] = OrderedDict()
_sdk_clients_lock = threading.Lock()


def sdk_client(base_url: str, api_key: str, *, timeout: float) -> openai.OpenAI:
    """This process's SDK client of the server at `base_url` with `api_key` (a forked process makes its own).

    A dropped client is not closed (another thread may be reading its stream): its connections close with it."""
    key = (os.getpid(), base_url, api_key, timeout)
    with _sdk_clients_lock:
        client = _sdk_clients.get(key)
        if client is None:
            client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
            _sdk_clients[key] = client
            while len(_sdk_clients) > SDK_CLIENTS:
                _sdk_clients.popitem(last=False)
        _sdk_clients.move_to_end(key)
        return client


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None):
        self.base_url = base_url or settings.TOOLHUB_MODEL_BASE_URL
        self.model = model or settings.TOOLHUB_MODEL
        self.client = sdk_client(
            self.base_url,
            # The SDK needs some key; local servers (Ollama, vLLM, llama.cpp) ignore it.
            (settings.TOOLHUB_MODEL_API_KEY if api_key is None else api_key) or "not-needed",
            timeout=settings.TOOLHUB_MODEL_TIMEOUT,  # each call passes its own; no SDK retries: stream() makes them
        )
        self.label = f"{self.model} at {self.base_url}"

    def stream(
        self,
        messages: list[dict],
        tools: list[dict],
        *,
        hints: TurnHints,
        tool_choice=None,
        parallel_tool_calls=None,
        max_tokens: int | None = None,
    ) -> Iterator[ModelChunk]:
        where = urlsplit(self.base_url)
        steps = self._stream(messages, tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                             max_tokens=max_tokens)  # fmt: skip
        return traced(steps, provider="openai", model=self.model, messages=messages, tools=tools,
                      server=where.hostname or "", port=where.port)  # fmt: skip

    def _stream(
        self, messages: list[dict], tools: list[dict], *, tool_choice, parallel_tool_calls, max_tokens: int | None
    ) -> Iterator[ModelChunk]:
        request = {"model": self.model, "messages": messages, "stream": True}
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if tools:  # toolhub's and the client's alike; the client's choices pass through as it sent them
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
            if parallel_tool_calls is not None:
                request["parallel_tool_calls"] = parallel_tool_calls
        deadline = time.monotonic() + settings.TOOLHUB_MODEL_TIMEOUT
        calls: dict[int, dict] = {}
        finish = None
        for attempt in range(settings.TOOLHUB_MODEL_RETRIES + 1):
            streamed = False
            try:
                response = self.client.chat.completions.create(**request, timeout=self._left(deadline))
                with response:
                    for chunk in response:
                        self._left(deadline)  # a server that trickles past the deadline is cut off too
                        if getattr(chunk, "usage", None):  # servers that report it (OpenAI's include_usage)
                            report_usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                        if not chunk.choices:
                            continue
                        choice = chunk.choices[0]
                        delta = choice.delta
                        if delta and delta.content:
                            streamed = True
                            yield ModelChunk(content=delta.content)
                        for fragment in (delta.tool_calls or []) if delta else []:
                            streamed = True
                            call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
                            call["id"] = fragment.id or call["id"]
                            if fragment.function:
                                call["name"] += fragment.function.name or ""
                                call["arguments"] += fragment.function.arguments or ""
                        finish = choice.finish_reason or finish
                break
            except openai.APITimeoutError:
                raise self._timeout() from None
            except openai.OpenAIError as exc:
                if streamed or attempt == settings.TOOLHUB_MODEL_RETRIES or not retryable(exc):
                    raise ModelUnavailable(f"the model at {self.base_url} {failure(exc)}") from None
                time.sleep(min(0.5 * 2**attempt, self._left(deadline)))
        tool_calls = tuple(
            ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}")
            for index, call in sorted(calls.items())
        )
        yield ModelChunk(tool_calls=tool_calls, finish_reason=finish or ("tool_calls" if tool_calls else "stop"))

    def _left(self, deadline: float) -> float:
        """Seconds left before the call's deadline; ModelTimeout once it has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._timeout()
        return left

    def _timeout(self) -> ModelTimeout:
        return ModelTimeout(f"the model at {self.base_url} did not answer within {settings.TOOLHUB_MODEL_TIMEOUT:g} s")


def failure(exc: openai.OpenAIError) -> str:
    """What went wrong, as an operator reads it on the turn: never the server's own text, which may echo a key."""
    if isinstance(exc, openai.APIConnectionError):
        return "could not be reached (no connection)"
    if isinstance(exc, openai.APIStatusError):
        return f"answered HTTP {exc.status_code}"
    return f"failed: {exc.__class__.__name__}"


def retryable(exc: openai.OpenAIError) -> bool:
    """What the SDK itself would retry: no connection, or 408, 409, 429 and 5xx answers."""
    if isinstance(exc, openai.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return status in (408, 409, 429) or (status is not None and status >= 500)
