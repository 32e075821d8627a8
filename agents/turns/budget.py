"""The token budget of one model step, split the way the console's budget bar shows it; pure arithmetic, never I/O.

Parts, in cl100k tokens: the system prompt without its knowledge section
(base rules, client instructions, archive of deferred names), the knowledge
section, the loaded tool schemas, the conversation kept in memory, and the
reserve (the model's reply plus room for tool results) against the model's
context window. ``agents.turns.runtime`` records one as a ``routing`` event (phase
``budget``) whenever a step's figures change.
"""

from typing import Any, Protocol

from catalog.knowledge.registry import knowledge_section
from catalog.models.tokens import count_tokens

from .memory import TokenLimits

PARTS = ("system", "tools", "knowledge", "memory", "reserve")


class BudgetProfile(TokenLimits, Protocol):
    """What `token_budget` reads of a model profile (agents.models.ModelProfile has it)."""

    @property
    def name(self) -> str: ...


def token_budget(
    profile: BudgetProfile, *, system_tokens: int, tool_tokens: int, knowledge: list[dict[str, Any]], memory_tokens: int
) -> dict[str, int | str]:
    """A plain dict (stored in the event payload): each part, the window, and what is left free."""
    section = knowledge_section(knowledge)
    knowledge_tokens = count_tokens(section) if section else 0
    parts = {
        "system": max(system_tokens - knowledge_tokens, 0),
        "tools": tool_tokens,
        "knowledge": knowledge_tokens,
        "memory": memory_tokens,
        "reserve": profile.max_output_tokens + profile.reserved_result_tokens,
    }
    used = sum(parts.values())
    return {**parts, "window": profile.context_window, "free": profile.context_window - used, "profile": profile.name}
