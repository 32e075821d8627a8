"""The LLM steward: an OpenAI-compatible model chooses among the tools policy permits for the request.

It sees the query and at most `llm_max_candidates` permitted tools (names and
one-line descriptions): the rules' picks first, then the search's ranking of
everything the fused decision permits, so it can choose a tool that no phrase
list names. It must answer with a ToolRecommendation (JSON schema, structured
output). On a timeout, an error, invalid JSON, or a tool name that was not a
candidate, the rules steward's result stands, marked as a fallback: the user
always gets an answer. It never widens what policy allows; the intent and the
silent time injection follow what it chose. It asks the turn's model (its
profile's upstream: model, server and key), or the default profile's.
"""

import json
import logging
from dataclasses import replace

import jsonschema
import openai
from django.conf import settings

from agents.models import default_profile
from agents.providers import ModelUnavailable, Upstream, upstream_of
from agents.providers.openai_compat import sdk_client
from catalog.policies.bundle import allowed_names

from .rules import StewardContext, StewardResult, flow_entry_tools, stand_in_for_flows, with_recommendations

log = logging.getLogger(__name__)

TOOL_RECOMMENDATION = {
    "type": "object",
    "properties": {
        "tools": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "reasoning": {"type": "string"},
    },
    "required": ["tools", "reasoning"],
    "additionalProperties": False,
}

INSTRUCTIONS = (
    "You are the steward of a tool-using assistant. Given a user request and candidate tools, "
    "choose the 0-5 tools the assistant needs, best first. Choose none for general knowledge. "
    "Only use names from the candidate list. Answer with JSON only."
)


class StewardUnavailable(Exception):
    """The LLM steward gave no usable answer; the message says why."""


def client(upstream: Upstream) -> openai.OpenAI:
    """An SDK client of the upstream's server; raises StewardUnavailable when there is none to ask."""
    if upstream.offline:
        raise StewardUnavailable(f"model profile {upstream.profile or 'default'} calls no model server")
    try:
        api_key = upstream.api_key()
    except ModelUnavailable as exc:
        raise StewardUnavailable(str(exc)) from None
    return sdk_client(upstream.base_url, api_key or "not-needed",
                      timeout=settings.TOOLHUB_STEWARD_OPTIONS["analysis_timeout"])  # fmt: skip


def candidates(text: str, rules: StewardResult, context: StewardContext) -> list[tuple[str, str]]:
    """Permitted tools for the decision, the rules' picks first, then by search rank."""
    allowed = set(allowed_names(rules.decision, context.entries)) | set(rules.recommended_tools)
    limit = settings.TOOLHUB_STEWARD_OPTIONS["llm_max_candidates"]
    ranked = list(rules.recommended_tools) + context.search(text, allowed, limit)
    names = [name for name in dict.fromkeys(ranked) if name in allowed][:limit]
    descriptions = {entry.name: entry.description for entry in context.entries if entry.name in set(names)}
    return [(name, descriptions[name].split("\n")[0][:200]) for name in names]


def recommend(text: str, tools: list[tuple[str, str]], *, max_tools: int, upstream: Upstream) -> tuple[list[str], str]:
    """Ask the upstream model; raise StewardUnavailable unless it answers with valid candidate names."""
    model = client(upstream)
    listing = "\n".join(f"- {name}: {description}" for name, description in tools)
    try:
        response = model.chat.completions.create(
            model=upstream.model,
            temperature=0,
            messages=[
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": f"Request: {text}\n\nCandidate tools:\n{listing}"},
            ],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "ToolRecommendation", "schema": TOOL_RECOMMENDATION, "strict": True},
            },
        )
        content = response.choices[0].message.content or ""
    except openai.APITimeoutError:
        raise StewardUnavailable("the model did not answer within the steward timeout") from None
    except openai.OpenAIError as exc:
        raise StewardUnavailable(f"the model server failed: {exc.__class__.__name__}") from None
    try:
        answer = json.loads(content)
        jsonschema.validate(answer, TOOL_RECOMMENDATION)
    except (ValueError, jsonschema.ValidationError):
        raise StewardUnavailable("the model's answer is not a valid ToolRecommendation") from None
    known = {name for name, _ in tools}
    invented = [name for name in answer["tools"] if name not in known]
    if invented:
        raise StewardUnavailable(f"the model named tools that are not candidates: {', '.join(invented)}")
    return list(dict.fromkeys(answer["tools"]))[:max_tools], answer["reasoning"]


def llm_analysis(
    text: str,
    rules: StewardResult,
    context: StewardContext,
    *,
    max_tools: int,
    mode: str,
    upstream: Upstream | None = None,
) -> StewardResult:
    """The recommendation of `upstream` (default: the default profile's), or the rules' result as a fallback."""
    upstream = upstream or upstream_of(default_profile())
    try:
        picked, reasoning = recommend(text, candidates(text, rules, context), max_tools=max_tools, upstream=upstream)
    except StewardUnavailable as exc:
        log.warning("LLM steward unavailable, rules answer: %s", exc)
        return replace(rules, fallback=True, notes=(str(exc),), reasoning=f"{rules.reasoning} (fallback: {exc})")
    entry_tools = flow_entry_tools(rules.decision, context.entries)
    picked = stand_in_for_flows(picked, rules.decision, entry_tools)[:max_tools]
    return with_recommendations(rules, picked, reasoning, mode)
