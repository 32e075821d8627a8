"""Any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, OpenAI) through the official SDK.

Streams content deltas as they arrive and assembles streamed tool calls
(fragments by index) into whole calls at the end of the step. One call has one
deadline (TOOLHUB_MODEL_TIMEOUT, or less when the turn has less left) that its
retries share: the request runs in a helper thread and the caller stops waiting
at the deadline, whatever the server does (hangs before or during the answer,
refuses connections, fails with 5xx).
"""

import queue
import threading
import time
from collections.abc import Iterator

import openai
from django.conf import settings

from . import ModelChunk, ModelUnavailable, ToolCall, TurnHints

# Failures worth another try within the deadline (connection refused or reset, timeouts, 5xx, 429).
RETRIED = (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError)
FIRST_BACKOFF_SECONDS = 0.5
_END = object()


class OpenAICompatProvider:
    name = "openai"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None):
        self.base_url = base_url or settings.TOOLHUB_MODEL_BASE_URL
        self.model = model or settings.TOOLHUB_MODEL
        # The SDK's own retries and timeout would each restart the clock: this class keeps one per call.
        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or settings.TOOLHUB_MODEL_API_KEY or "not-needed",
            timeout=settings.TOOLHUB_MODEL_TIMEOUT,
            max_retries=0,
        )
        self.label = f"{self.model} at {self.base_url}"

    def stream(
        self, messages: list[dict], tools: list[dict], *, hints: TurnHints, deadline: float | None = None
    ) -> Iterator[ModelChunk]:
        """`deadline` is a time.monotonic() value; without one the call gets TOOLHUB_MODEL_TIMEOUT from now."""
        started = time.monotonic()
        deadline = deadline if deadline is not None else started + settings.TOOLHUB_MODEL_TIMEOUT
        request = {"model": self.model, "messages": messages, "stream": True}
        if tools:
            request["tools"] = tools
        chunks: queue.Queue = queue.Queue()
        stop = threading.Event()
        threading.Thread(
            target=self._produce, args=(request, deadline, chunks, stop), name="model-call", daemon=True
        ).start()
        try:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    item = chunks.get(timeout=max(remaining, 0))
                except queue.Empty:
                    waited = time.monotonic() - started
                    raise ModelUnavailable(
                        f"the model at {self.base_url} did not answer within {waited:.0f} s "
                        f"(TOOLHUB_MODEL_TIMEOUT is {settings.TOOLHUB_MODEL_TIMEOUT:g} s, retries included)"
                    ) from None
                if item is _END:
                    return
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            stop.set()  # the helper drops the connection at its next chunk, or when its own timeout ends the read

    def _produce(self, request: dict, deadline: float, chunks: queue.Queue, stop: threading.Event) -> None:
        """Run the request, trying again on a retriable failure until nothing was streamed yet and time is left."""
        tries = settings.TOOLHUB_MODEL_RETRIES + 1
        for attempt in range(tries):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop.is_set():
                return
            streamed = False
            try:
                response = self.client.with_options(timeout=remaining).chat.completions.create(**request)
                try:
                    for chunk in self._chunks(response):
                        if stop.is_set():
                            return
                        streamed = True
                        chunks.put(chunk)
                finally:
                    response.close()
                chunks.put(_END)
                return
            except RETRIED as exc:
                if streamed or attempt == tries - 1:
                    chunks.put(self._unavailable(exc))
                    return
                stop.wait(min(FIRST_BACKOFF_SECONDS * 2**attempt, max(deadline - time.monotonic(), 0)))
            except openai.OpenAIError as exc:
                chunks.put(self._unavailable(exc))
                return
            except Exception as exc:  # a broken answer: the caller's turn fails with it, visibly
                chunks.put(ModelUnavailable(f"the model at {self.base_url} sent an answer toolhub cannot read: {exc}"))
                return

    def _unavailable(self, exc: Exception) -> ModelUnavailable:
        if isinstance(exc, openai.APITimeoutError):
            return ModelUnavailable(f"the model at {self.base_url} did not answer in time")
        return ModelUnavailable(f"the model at {self.base_url} failed: {exc.__class__.__name__}")

    def _chunks(self, response) -> Iterator[ModelChunk]:
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
        tool_calls = tuple(
            ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}")
            for index, call in sorted(calls.items())
        )
        yield ModelChunk(tool_calls=tool_calls, finish_reason=finish or ("tool_calls" if tool_calls else "stop"))
