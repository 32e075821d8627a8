"""The prompt of one step: system prompt (rules, archive, knowledge) and the enriched user message.

Enrichment, as in the seed: the steward's recommendation and any silent
date/time go into the user message's context, never into a visible status.
Pure string building; token counting is done here so the budget is exact.
"""

from typing import Any

from catalog.knowledge.registry import knowledge_section
from catalog.models.tokens import count_json_tokens
from catalog.policies.bundle import CapabilityBundle

from .memory import TokenLimits, message_tokens
from .memory import budget as memory_budget

BASE_SYSTEM_PROMPT = (
    "You are an assistant that uses tools. Use a tool when it is needed and only with arguments the user "
    "gave or a tool returned; if a required argument is missing, ask the user for it instead of inventing it. "
    "Answer plainly and say when you cannot do something."
)


def system_prompt(bundle: CapabilityBundle, knowledge: list[dict[str, Any]], instructions: str = "") -> str:
    """Base rules, the client's own system instructions, the archive of deferred tools, knowledge."""
    parts = [BASE_SYSTEM_PROMPT, instructions, bundle.archive, knowledge_section(knowledge)]
    return "\n\n".join(part for part in parts if part)


def enrich(user_text: str, *, recommended: tuple[str, ...], context: str) -> str:
    """The user message as the model sees it: the request plus the steward's context."""
    notes = []
    if context:
        notes.append(context)
    if recommended:
        notes.append(f"The steward recommends these tools: {', '.join(recommended)}.")
    if not notes:
        return user_text
    return f"{user_text}\n\n[context]\n" + "\n".join(notes)


def tool_definitions(bundle: CapabilityBundle) -> list[dict[str, Any]]:
    """What the model is offered: toolhub's loaded tools, then the client's own (counted in the budget alike)."""
    return [tool.definition for tool in bundle.loaded] + [tool.definition for tool in bundle.client]


def request_budget(profile: TokenLimits, *, instructions: str, tools: list[dict[str, Any]]) -> int:
    """Tokens left for the conversation before anything runs: the base prompt with the client's
    instructions and the client's tools; the turn's bundle and knowledge only take more."""
    system = "\n\n".join(part for part in (BASE_SYSTEM_PROMPT, instructions) if part)
    system_tokens, tool_tokens = prompt_tokens(system, tools)
    return memory_budget(profile, system_tokens=system_tokens, tool_tokens=tool_tokens)


def prompt_tokens(system: str, tools: list[dict[str, Any]]) -> tuple[int, int]:
    """(system message tokens with its framing, tool schema tokens) as the budget counts them."""
    return message_tokens({"role": "system", "content": system}), sum(count_json_tokens(tool) for tool in tools)
