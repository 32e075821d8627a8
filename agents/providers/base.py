"""The provider protocol and what crosses it: chunks, tool calls, hints, errors, and the upstream a profile calls.

Plain data and a Protocol only: never imports a provider implementation (agents.providers.registry does).
"""

import os
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
    """`tool_choice` and `parallel_tool_calls` are the API client's (OpenAI semantics), None when unsaid;
    `max_tokens` bounds the answer (an MCP server's sampling request), None for the model's own limit."""

    name: str
    label: str

    def stream(
        self,
        messages: list[dict],
        tools: list[dict],
        *,
        hints: TurnHints,
        tool_choice=None,
        parallel_tool_calls=None,
        max_tokens: int | None = None,
    ) -> Iterator[ModelChunk]: ...


# The API's `model` field and /v1/models say so whenever the builtin model answers; pages show its label.
BUILTIN_MODEL_ID = "builtin-offline-rule-based"
BUILTIN_LABEL = "builtin (offline, rule-based)"


@dataclass(frozen=True)
class Upstream:
    """The model a profile calls. `base_url` empty: the builtin offline model. `api_key_env` names the
    environment variable holding the key (empty: TOOLHUB_MODEL_API_KEY); the key itself is never stored."""

    model: str = ""
    base_url: str = ""
    api_key_env: str = ""
    profile: str = ""

    @property
    def offline(self) -> bool:
        return not self.base_url

    @property
    def model_id(self) -> str:
        """What the API's `model` field answers: the upstream model's name, or the builtin's offline label."""
        return BUILTIN_MODEL_ID if self.offline else self.model

    @property
    def kind(self) -> str:
        """The provider kind that calls it (agents.providers.registry): the builtin model without a server."""
        return "builtin" if self.offline else "openai"

    @property
    def label(self) -> str:
        """How pages name it: the builtin's own label, or the model and its server."""
        return BUILTIN_LABEL if self.offline else f"{self.model} at {self.base_url}"

    def api_key(self) -> str:
        """The key to send. TOOLHUB_MODEL_API_KEY goes only to TOOLHUB_MODEL_BASE_URL: a profile with a server of
        its own sends its own variable's key, or none."""
        if not self.api_key_env:
            return settings.TOOLHUB_MODEL_API_KEY if self.base_url == settings.TOOLHUB_MODEL_BASE_URL else ""
        key = os.environ.get(self.api_key_env)
        if key is None:
            raise ModelUnavailable(
                f"model profile {self.profile or '?'} reads its API key from ${self.api_key_env}, which is not set"
            )
        return key


def upstream_of(profile) -> Upstream:
    """The upstream of a ModelProfile (or of none): its own fields, TOOLHUB_MODEL* for those it leaves empty.

    A profile without its own base URL calls the server the settings name, or the builtin model when they
    name none; a model name is sent only to a real server ("default" when neither profile nor settings say).
    """
    own_url = getattr(profile, "base_url", "")
    base_url = own_url or (settings.TOOLHUB_MODEL_BASE_URL if settings.TOOLHUB_MODEL_PROVIDER == "openai" else "")
    if not base_url:
        return Upstream(profile=getattr(profile, "name", ""))
    return Upstream(
        model=getattr(profile, "upstream_model", "") or settings.TOOLHUB_MODEL or "default",
        base_url=base_url,
        api_key_env=getattr(profile, "api_key_env", ""),
        profile=getattr(profile, "name", ""),
    )
