"""Model providers: stream (messages, tools) -> content deltas and tool calls; a provider never executes a tool.

- base.py           the protocol and its data (ToolCall, ModelChunk, TurnHints, Upstream, errors);
- registry.py       the provider of an upstream, by kind (`get_provider`); where a new kind registers;
- openai_compat.py  any OpenAI-compatible server through the official SDK;
- builtin/          the offline rule-based default model (labelled so everywhere);
- followups.py      which earlier requests a short reply continues (read by the router and the builtin model).

The runtime only sees the protocol. Never imports agents.turns, agents.router or the catalog's policy engine.
"""

from .base import (
    BUILTIN_LABEL,
    BUILTIN_MODEL_ID,
    ModelChunk,
    ModelTimeout,
    ModelUnavailable,
    Provider,
    ToolCall,
    TurnHints,
    Upstream,
    upstream_of,
)
from .registry import get_provider

__all__ = ["BUILTIN_LABEL", "BUILTIN_MODEL_ID", "ModelChunk", "ModelTimeout", "ModelUnavailable", "Provider",
           "ToolCall", "TurnHints", "Upstream", "get_provider", "upstream_of"]  # fmt: skip
