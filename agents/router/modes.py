"""The router's one entry point, `analyze`: the rules steward first, then the LLM steward when the mode asks.

Modes (TOOLHUB_STEWARD): rules (rules.py alone), llm (the LLM steward chooses
among the permitted candidates), hybrid (the LLM steward only below the
calibrated minimum confidence). Every LLM failure keeps the rules' answer.
Each analysis is a `steward` span with its decision and recommended tools (toolhub/tracing.py).
"""

import contextlib
import time
from dataclasses import replace

from django.conf import settings
from opentelemetry.util.types import AttributeValue

from agents.providers import Upstream
from catalog.search.service import one_catalog_state
from toolhub.tracing import content_recorded, tracer

from .fusion import ConversationState
from .llm import llm_analysis
from .rules import StewardContext, StewardMode, StewardResult, options, routable_text, rules_analysis


def analyze(
    text: str,
    state: ConversationState | None = None,
    *,
    context: StewardContext | None = None,
    mode: str | None = None,
    max_tools: int | None = None,
    min_tools: int | None = None,
    upstream: Upstream | None = None,
) -> StewardResult:
    """Analyze one request. Never raises for a steward failure: the rules answer instead.

    `upstream` is the model the LLM steward asks: the turn's (its profile's upstream); None, the default
    profile's.
    """
    with tracer().start_as_current_span("steward") as span:
        result = _analyze(text, state, context=context, mode=mode, max_tools=max_tools, min_tools=min_tools,
                          upstream=upstream)  # fmt: skip
        if span.is_recording():
            span.set_attributes(span_attributes(result, text))
        return result


def span_attributes(result: StewardResult, text: str) -> dict[str, AttributeValue]:
    """The steward's decision and recommendation as its span's attributes (the request itself only with
    TOOLHUB_TRACE_CONTENT)."""
    decision = result.decision
    attributes: dict[str, AttributeValue] = {
        "toolhub.steward.mode": str(result.mode),
        "toolhub.steward.intent": str(result.intent),
        "toolhub.steward.fallback": result.fallback,
        "toolhub.routing.action": str(decision.action),
        "toolhub.routing.domains": sorted(decision.domains),
        "toolhub.routing.confidence": round(decision.confidence, 3),
        "toolhub.routing.phase": decision.phase,
        "toolhub.routing.recommended_tools": list(result.recommended_tools),
    }
    if content_recorded():
        attributes["toolhub.steward.request"] = text
    return attributes


def _analyze(
    text: str,
    state: ConversationState | None,
    *,
    context: StewardContext | None,
    mode: str | None,
    max_tools: int | None,
    min_tools: int | None,
    upstream: Upstream | None,
) -> StewardResult:
    started = time.perf_counter()
    state = state or ConversationState()
    context = context or StewardContext.current()
    mode = mode or settings.TOOLHUB_STEWARD
    max_tools = options()["max_recommended_tools"] if max_tools is None else max_tools
    min_tools = options()["min_recommended_tools"] if min_tools is None else min(min_tools, max_tools)
    # A context made by hand (benchmarks, tests) has no catalog state to pin.
    with one_catalog_state(context.state) if context.state is not None else contextlib.nullcontext():
        rules = rules_analysis(text, state, context, max_tools=max_tools, min_tools=min_tools)
        result = rules
        use_llm = mode == StewardMode.LLM or (
            mode == StewardMode.HYBRID and rules.decision.confidence < settings.TOOLHUB_MIN_CONFIDENCE
        )
        if use_llm and routable_text(text):
            result = llm_analysis(
                routable_text(text), rules, context, max_tools=max_tools, mode=mode, upstream=upstream
            )
    return replace(result, latency_ms=(time.perf_counter() - started) * 1000)
