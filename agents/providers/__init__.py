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


class Provider(Protocol):
    name: str
    label: str

    def stream(self, messages: list[dict], tools: list[dict], *, hints: TurnHints) -> Iterator[ModelChunk]: ...


def get_provider() -> Provider:
    if settings.TOOLHUB_MODEL_PROVIDER == "openai":
        from .openai_compat import OpenAICompatProvider

        return OpenAICompatProvider()
    from .builtin import BuiltinProvider

    return BuiltinProvider()
