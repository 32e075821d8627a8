"""The steward: before the model runs, decide what the request needs and recommend 0-5 tools.

Two stages: the router's RoutingDecision first, then a ranking of only the
tools policy allows for that decision (catalog.search). The seed's rules:
arithmetic recommends the calculator; time/date questions recommend the clock
tools and the current time is injected silently; real-time questions reach
web search through its aliases; general knowledge recommends nothing. The
LLM steward (llm_steward.py) may re-rank, but any failure falls back to these
rules: the steward never blocks an answer. It never exposes a tool itself
(the bundle does) and never recommends one that policy denies.
"""

import datetime
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.utils import timezone

from catalog.bundle import allowed_names
from catalog.decision import CatalogEntry, RoutingDecision, current_catalog
from catalog.search import search_catalog

from .router import ConversationState, Vocabulary, decide, vocabulary


class Intent:
    MATH = "math"
    TIME = "time"
    REALTIME = "realtime"
    TOOLS = "tools"
    GENERAL = "general"


class StewardMode:
    RULES = "rules"
    LLM = "llm"
    HYBRID = "hybrid"
    OFF = "off"


# Arithmetic in any form the seed names: "15 + 27", "50% of 200", "sqrt(144)", "2^10".
ARITHMETIC = re.compile(
    r"\d\s*[-+*/×÷^]\s*[-(]?\s*\d"
    r"|\d+(?:\.\d+)?\s*%\s*(?:of|của)\s*\d"
    r"|\b(?:sqrt|cbrt|log|ln|exp|sin|cos|tan|abs|pow|round|floor|ceil)\s*\(",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class StewardContext:
    """What the steward reads: the catalog, its search and the router's vocabulary."""

    entries: Sequence[CatalogEntry]
    search: Callable[[str, Collection[str], int], list[str]]
    vocabulary: Vocabulary

    @classmethod
    def current(cls, *, owner_id: int | None = None) -> "StewardContext":
        """The live catalog; `owner_id`: whose learned examples may help the ranking (besides shared ones)."""

        def search(query: str, allowed: Collection[str], limit: int) -> list[str]:
            return search_catalog(query, allowed=allowed, limit=limit, owner_id=owner_id).names

        return cls(entries=current_catalog(), search=search, vocabulary=vocabulary())


@dataclass(frozen=True)
class StewardResult:
    intent: str
    decision: RoutingDecision
    recommended_tools: tuple[str, ...]
    reasoning: str
    requires_assistance: bool
    mode: str
    latency_ms: float
    fallback: bool = False
    silent: bool = False  # time/date: the context is injected, no tool status is shown
    context: str = ""  # silent enrichment for the user message
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        return {
            "intent": self.intent,
            **self.decision.as_dict(),
            "recommended_tools": list(self.recommended_tools),
            "reasoning": self.reasoning,
            "requires_assistance": self.requires_assistance,
            "mode": self.mode,
            "fallback": self.fallback,
            "latency_ms": round(self.latency_ms, 3),
        }


def options() -> dict:
    return settings.TOOLHUB_STEWARD_OPTIONS


def current_time_context(now: datetime.datetime | None = None) -> str:
    now = timezone.localtime(now or timezone.now())
    return f"Current date and time: {now:%A, %Y-%m-%d %H:%M} ({now.tzname()})."


def rules_analysis(
    text: str,
    state: ConversationState,
    context: StewardContext,
    *,
    max_tools: int,
    min_tools: int,
) -> StewardResult:
    """The rules steward: deterministic, no network; the fallback of every other mode."""
    started = time.perf_counter()
    hits = context.vocabulary.match(text)
    decision = decide(hits, state)
    allowed = allowed_names(decision, context.entries)
    picks: list[str] = []
    intent, silent, injected, reasons = Intent.GENERAL, False, "", []

    calculator = settings.TOOLHUB_CALCULATOR_TOOL
    if ARITHMETIC.search(text) and calculator in allowed:
        picks.append(calculator)
        intent = Intent.MATH
        reasons.append("arithmetic recommends the calculator")
    named = [name for name in hits.tools if name in allowed and name not in picks]
    clocks = [name for name in named if name in settings.TOOLHUB_CLOCK_TOOLS]
    if clocks and intent == Intent.GENERAL:
        intent, silent, injected = Intent.TIME, True, current_time_context()
        reasons.append("a time/date question: the current time is injected")
    if settings.TOOLHUB_WEB_SEARCH_TOOL in named and intent == Intent.GENERAL:
        intent = Intent.REALTIME
        reasons.append("a real-time question recommends web search")
    picks += named
    if named and intent == Intent.GENERAL:
        intent = Intent.TOOLS
        reasons.append("the request names tools by their aliases")
    wants_search = (decision.domains and not picks) or len(picks) < min_tools
    if wants_search:
        wanted = max(max_tools if not picks else min_tools, min_tools) - len(picks)
        found = [name for name in context.search(text, allowed, wanted + len(picks)) if name not in picks]
        picks += found[:wanted]
        if found:
            intent = Intent.TOOLS if intent == Intent.GENERAL else intent
            reasons.append(f"search over the {len(allowed)} tools policy allows")
    recommended = tuple(dict.fromkeys(picks))[:max_tools]
    if not recommended:
        reasons.append("general knowledge: no tool needed")
    return StewardResult(
        intent=intent,
        decision=decision,
        recommended_tools=recommended,
        reasoning="; ".join(reasons),
        requires_assistance=bool(recommended),
        mode=StewardMode.RULES,
        latency_ms=(time.perf_counter() - started) * 1000,
        silent=silent,
        context=injected,
    )


def analyze(
    text: str,
    state: ConversationState | None = None,
    *,
    context: StewardContext | None = None,
    mode: str | None = None,
    max_tools: int | None = None,
    min_tools: int | None = None,
) -> StewardResult:
    """Analyze one request. Never raises for a steward failure: the rules answer instead."""
    from .llm_steward import llm_analysis  # the LLM path needs the openai client; rules do not

    started = time.perf_counter()
    state = state or ConversationState()
    context = context or StewardContext.current()
    mode = mode or settings.TOOLHUB_STEWARD
    max_tools = options()["max_recommended_tools"] if max_tools is None else max_tools
    min_tools = options()["min_recommended_tools"] if min_tools is None else min(min_tools, max_tools)
    rules = rules_analysis(text, state, context, max_tools=max_tools, min_tools=min_tools)
    result = rules
    use_llm = mode == StewardMode.LLM or (
        mode == StewardMode.HYBRID and rules.decision.confidence < settings.TOOLHUB_MIN_CONFIDENCE
    )
    if use_llm:
        result = llm_analysis(text, rules, context, max_tools=max_tools, mode=mode)
    return replace(result, latency_ms=(time.perf_counter() - started) * 1000)
