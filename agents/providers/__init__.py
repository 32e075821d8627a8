"""Model providers: stream (messages, tools) -> content deltas and tool calls.

Two implementations: `openai_compat` (any OpenAI-compatible server through
the official SDK) and `builtin` (the offline rule-based default). The runtime
only sees this protocol; a provider never executes a tool itself.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as models send it


@dataclass(frozen=True)
class ModelChunk:
    """One streamed piece: some content, or the step's tool calls, or the end of the step."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None


@dataclass(frozen=True)
class TurnHints:
    """What the turn knows that a rule-based model may use; real models get it in the prompt."""

    user_text: str = ""
    recommended_tools: tuple[str, ...] = ()
    knowledge: tuple[dict, ...] = ()  # {"title", "text", "source"}
    context: str = ""  # silent enrichment (current time)
    extra: dict = field(default_factory=dict)
    client_tools: tuple[str, ...] = ()  # names of the API client's own tools among `tools`
    step_tools: tuple[str, ...] = ()  # the active workflow's tools for its current phase
    read_only_tools: frozenset[str] = frozenset()  # tools whose policy only reads (read, list, search)
    known_values: dict = field(default_factory=dict)  # values earlier tools returned, kept by the workflow


class ModelUnavailable(Exception):
    """The model server could not be reached or failed; the message is safe to show to operators."""


class ModelTimeout(ModelUnavailable):
    """The model server did not answer within TOOLHUB_MODEL_TIMEOUT."""


class Provider(Protocol):
    """`tool_choice` and `parallel_tool_calls` are the API client's (OpenAI semantics), None when unsaid."""

    name: str
    label: str

    def stream(
        self, messages: list[dict], tools: list[dict], *, hints: TurnHints, tool_choice=None, parallel_tool_calls=None
    ) -> Iterator[ModelChunk]: ...


def get_provider() -> Provider:
    if settings.TOOLHUB_MODEL_PROVIDER == "openai":
        from .openai_compat import OpenAICompatProvider

        return OpenAICompatProvider()
    from .builtin import BuiltinProvider

    return BuiltinProvider()
