"""The rules steward: before the model runs, decide what the request needs and recommend 0-5 tools.

Two stages: the fused RoutingDecision first (fusion.py), then the tools that
policy allows for that decision (catalog.policies.bundle.allowed_names), ranked by the
same evidence. The seed's rules: arithmetic recommends the calculator; a
recommended clock tool means the current time is injected silently; real-time
questions reach web search because their meaning does; general knowledge
recommends nothing. A request that starts a staged flow recommends the flow's
first step, never the one-shot tool the flow stands in for. The LLM steward
(llm.py) chooses among the top permitted candidates instead, when modes.py
asks it; any failure falls back to these rules: the steward never blocks an
answer. It never exposes a tool itself (the bundle does) and never recommends
one that policy denies.
"""

import datetime
import functools
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.utils import timezone

from catalog.models import Action
from catalog.policies.bundle import allowed_names
from catalog.policies.decision import CatalogEntry, PolicyView, RoutingDecision, current_catalog, entries_by_name
from catalog.policies.flows import Flow, configured_flows
from catalog.search import embeddings
from catalog.search.service import SearchResult, one_catalog_state, rank_catalog, search_catalog

from .fusion import ConversationState, Evidence, Routed, fuse, segments
from .lexicon import ACTION_OF_OPERATION, READ_ACTIONS, Lexicon, is_plain, lexicon
from .nearest_examples import (
    EMPTY,
    ExampleIndex,
    blend,
    comparable_vectors,
    example_index,
    unit,
    without_quotes,
    written_and_generic,
)

if TYPE_CHECKING:
    from toolhub.settings import StewardOptions


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


# Arithmetic written with symbols: "15 + 27", "4567 x 89", "50% of 200", "sqrt(144)", "2^10".
# Words are the examples' job. An x is a times sign only between numbers ("2x points" is a multiplier).
ARITHMETIC = re.compile(
    r"\d\s*[-+*/×÷^xX]\s*[-(]?\s*\d"
    r"|\d+(?:\.\d+)?\s*%\s*(?:of|của)\s*\d"
    r"|\b(?:sqrt|cbrt|log|ln|exp|sin|cos|tan|abs|pow|round|floor|ceil)\s*\(",
    re.IGNORECASE,
)
# What looks like arithmetic but is not: a quoted name ("the 'Mừng 8/3' campaign"), a date
# ("2025-01-31", "from 1/3 to 10/3", "Aug 1-31", "ngày 15/8") or a code with a dash ("M-100").
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
NOT_ARITHMETIC = re.compile(
    r"(['\"“‘«]).*?(?:\1|[\"”’»])"
    r"|\b\d{4}-\d{1,2}-\d{1,2}\b"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|(?:\b(?:ngày|từ|đến|tới|sang|hôm|on|from|to|until|till|by|since|before|after)\s+)\d{1,2}/\d{1,2}\b"
    r"|\b\d{1,2}/\d{1,2}(?=\s*(?:-|–|đến|tới|to|until)\s*\d{1,2}/\d{1,2}\b)"
    r"|\b" + _MONTH + r"\s+\d{1,2}\s*[-–]\s*\d{1,2}\b"
    r"|\b\d{1,2}\s*[-–]\s*\d{1,2}\s+" + _MONTH + r"(?!\w)"
    r"|\b(?:tháng|thang)\s+\d{1,2}\s*[-–]\s*\d{1,2}\b"
    r"|\b[A-Za-z]+-\d[\w-]*",
    re.IGNORECASE,
)
# A request longer than this is routed on its first MAX_ROUTED_CHARS (a pasted document
# says what it wants at its start); the model still gets all of it.
MAX_ROUTED_CHARS = 2000
# A request longer than this is a document, not a request: it routes to answer with no tools, as an empty one does,
# without reading it (the model still gets all of it, and the catalog's search tool). Reading even the first 2,000
# characters of prose takes the steward 40-110 ms on this 2-core host, past its 25 ms bound.
DOCUMENT_CHARS = 8000
MAX_WORD_CHARS = 40
EXPRESSION_WORDS = 4
_WORDS = re.compile(r"[^\W\d_]+")
# Up to RECOMMEND_PER_INTENT permitted candidates within RECOMMEND_MARGIN of the best are
# recommended for one intent (the model picks among them; the LLM steward sees more).
RECOMMEND_PER_INTENT = 3
RECOMMEND_MARGIN = 0.25
RANKING_LIMIT = 20
# The router counts examples as neighbours (examples.py), so its ranking weighs their boost less
# than tool_search does (1.0): with 0.3, routing_dev 0.912 and a blind held-out set 0.87, against
# 0.912 / 0.86 at 1.0; at 1.0 an example naming the same city or number outranked the right tool.
RANKING_EXAMPLE_WEIGHT = 0.3


@dataclass(frozen=True)
class StewardContext:
    """What the steward reads: the catalog, its search, the examples and the phrase lists."""

    entries: Sequence[CatalogEntry]
    search: Callable[[str, Collection[str], int], list[str]]
    lexicon: Lexicon
    # (routing ranking, candidates' ranking) over the whole catalog, each [(tool, score), ...]: the first by the
    # routing model decides the request, the second by both models (catalog.search.ensemble) orders its candidate
    # tools. Called with the text, its vector by the routing model when the steward has it, and its vector by the
    # search model: with None, the second ranking is the first.
    rank: Callable[..., tuple[list[tuple[str, float]], list[tuple[str, float]]]] | None = None
    examples: ExampleIndex = EMPTY
    embed: Callable[[list[str]], np.ndarray] | None = None
    # The search model's embedding, for rank's second vector (one batch for a request and its clauses); None when
    # the candidates are ranked by the routing model alone (TOOLHUB_ROUTING_SEARCH_WEIGHT 0).
    embed_tools: Callable[[list[str]], np.ndarray] | None = None
    owner_id: int | None = None
    # The catalog state everything above was read at; analyze() ranks against the same one.
    state: tuple[int, str] | None = None

    @classmethod
    def current(cls, *, owner_id: int | None = None) -> "StewardContext":
        """The live catalog; `owner_id`: whose learned examples may help (besides shared ones)."""

        def search(query: str, allowed: Collection[str], limit: int) -> list[str]:
            return search_catalog(query, allowed=allowed, limit=limit, owner_id=owner_id).names

        def rank(
            query: str, vector: np.ndarray | None = None, second_vector: np.ndarray | None = None
        ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
            routing, both = rank_catalog(
                query,
                model=model,
                limit=RANKING_LIMIT,
                owner_id=owner_id,
                example_weight=RANKING_EXAMPLE_WEIGHT,
                vector=vector,
                second_model=embeddings.search_model(),
                second_weight=weight if second_vector is not None else 0.0,
                second_vector=second_vector,
            )
            return pairs(routing), pairs(both)

        weight = settings.TOOLHUB_ROUTING_SEARCH_WEIGHT
        dense, model = embeddings.dense_enabled(), embeddings.routing_model()
        with one_catalog_state() as state:
            return cls(
                entries=current_catalog(),
                search=search,
                lexicon=lexicon(),
                rank=rank,
                examples=example_index(),
                embed=functools.partial(embeddings.embed_texts, model=model) if dense else None,
                embed_tools=functools.partial(embeddings.embed_texts, model=embeddings.search_model())
                if dense and weight > 0 and embeddings.search_model() != model
                else None,
                owner_id=owner_id,
                state=state,
            )


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

    def as_dict(self) -> dict[str, object]:
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


def options() -> "StewardOptions":
    return settings.TOOLHUB_STEWARD_OPTIONS


def current_time_context(now: datetime.datetime | None = None) -> str:
    now = timezone.localtime(now or timezone.now())
    return f"Current date and time: {now:%A, %Y-%m-%d %H:%M} ({now.tzname()})."


def routable_text(text: str | None) -> str:
    """The part of a request the router reads: printable text, at most MAX_ROUTED_CHARS; none of a document."""
    text = str(text or "")
    if len(text) > DOCUMENT_CHARS:
        return ""
    text = text[:MAX_ROUTED_CHARS]
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate cannot be embedded
    # No word of any language is that long: a run like "xxxx..." or base64 says nothing to route.
    return " ".join(word for word in text.split() if len(word) <= MAX_WORD_CHARS)


def gather(texts: list[str], context: StewardContext) -> list[Evidence]:
    """The evidence of each text: its nearest examples, its rank over the catalog, its phrases.

    `texts`: the request, then its clauses when it has several (route)."""
    by_name = entries_by_name(context.entries)
    vectors = written = None
    if context.embed is not None and len(texts) > 1 and len(context.examples):
        vectors, written = whole_from_clauses(texts[1:], context.embed)
    elif context.embed is not None and len(texts) > 1:  # no examples to compare with: the clauses as written only
        written = whole_and_clauses(texts, context.embed)
    elif context.embed is not None and len(context.examples):
        vectors = comparable_vectors(texts, context.embed)
    second = whole_and_clauses(texts, context.embed_tools) if context.embed_tools is not None else None
    found = []
    for position, text in enumerate(texts):
        known = written[position] if written is not None else None
        ranking: list[tuple[str, float]] = []
        tool_ranking: list[tuple[str, float]] = []
        if context.rank is not None:
            ranking, tool_ranking = context.rank(text, known, second[position] if second is not None else None)
        ranking = [(name, score) for name, score in ranking if _policy(by_name.get(name)) is not None]
        tool_ranking = [(name, score) for name, score in tool_ranking if _policy(by_name.get(name)) is not None]
        vector = vectors[position] if vectors is not None else None
        found.append(
            Evidence(
                text=text,
                neighbours=context.examples.nearest(vector, owner_id=context.owner_id, plain=is_plain(text)),
                ranking=ranking,
                hits=context.lexicon.match(text),
                tool_ranking=tool_ranking,
                # ranking keeps only the names whose entry has a policy (filtered above).
                operations={name: by_name[name].policy.operation for name, _ in ranking},  # type: ignore[union-attr]
                domains_of={name: by_name[name].policy.domains for name, _ in ranking},  # type: ignore[union-attr]
            )
        )
    return found


def whole_from_clauses(clauses: list[str], embed: Callable[[list[str]], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(comparable, written) vectors of a multi-clause request and of each clause, the request first.

    Only the clauses are embedded. e5 mean-pools its tokens, so the whole request's vector is
    close to its clauses' vectors weighted by their length: embedding the request as well
    read every word twice, the steward's slowest requests (routing_dev's two-clause requests
    took 38-43 ms, the others at most 28)."""
    written, generic = written_and_generic(clauses, embed)
    written = with_whole(clauses, written)
    return blend(written, with_whole(clauses, generic)), written


def whole_and_clauses(texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """Vectors of the request and its clauses as written (`texts`, as gather has them) in one call of `embed`:
    with clauses, only they are embedded (whole_from_clauses)."""
    if len(texts) == 1:
        return np.asarray(embed(texts), dtype=np.float32)
    return with_whole(texts[1:], np.asarray(embed(texts[1:]), dtype=np.float32))


def with_whole(clauses: list[str], vectors: np.ndarray) -> np.ndarray:
    """The clauses' vectors under the request's: their sum weighted by each clause's words, unit length."""
    weights = np.array([[len(clause.split())] for clause in clauses], dtype=np.float32)
    return unit(np.vstack([(weights * vectors).sum(axis=0), vectors]))


def pairs(found: SearchResult) -> list[tuple[str, float]]:
    return list(zip(found.names, found.scores, strict=True))


def _policy(entry: CatalogEntry | None) -> PolicyView | None:
    return entry.policy if entry is not None else None


def route(text: str, state: ConversationState, context: StewardContext) -> tuple[Routed, list[Routed]]:
    """The whole request's reading, and one per clause when it has several."""
    clauses = segments(text) if not state.workflow_phase else []
    evidence = gather([text, *clauses], context)
    whole = fuse(evidence[0], state)
    parts = [fuse(item, state) for item in evidence[1:]]
    if parts:
        whole = merge(whole, parts)
    return whole, parts


def merge(whole: Routed, parts: list[Routed]) -> Routed:
    """A multi-clause request: the clauses' domains join the whole's; a confident write clause
    leads only when the whole request reads as a read and is not a question or a read command."""
    needing = [part for part in parts if part.needs_tool]
    if not needing:
        return whole
    lead = whole
    # A request that as a whole wants to read ("voucher của M-300 còn hạn không") is not led by
    # a clause that reads as a write once cut off from its question.
    if whole.decision.action in READ_ACTIONS and not whole.reads_only:
        # A clause that is itself a question ("xoá sổ?") never leads as a write.
        writes = [part for part in needing if part.decision.action not in READ_ACTIONS and not part.question]
        if writes:
            lead = max(writes, key=lambda p: p.decision.confidence)
    domains = frozenset().union(*(part.decision.domains for part in needing)) | lead.decision.domains
    decision = replace(lead.decision, domains=domains)
    return Routed(decision, True, lead.raw_confidence, whole.tool_scores, reads_only=whole.reads_only, text=whole.text)


def recommend(
    routed: Routed, parts: list[Routed], text: str, context: StewardContext, *, max_tools: int
) -> tuple[list[str], list[str]]:
    """(recommended tools, reasons): the best permitted candidates of the request and of each clause."""
    decision = routed.decision
    allowed = allowed_names(decision, context.entries)
    picks: list[str] = []
    reasons: list[str] = []
    calculator = settings.TOOLHUB_CALCULATOR_TOOL
    symbolic = bool(ARITHMETIC.search(NOT_ARITHMETIC.sub(" ", text))) and calculator in allowed
    if symbolic:
        picks.append(calculator)
        reasons.append("arithmetic recommends the calculator")
    # A written-out expression with a few words around it ("What is 15 + 27?") is the calculator's alone.
    expression_only = symbolic and len(_WORDS.findall(text)) <= EXPRESSION_WORDS
    entry_tools = flow_entry_tools(decision, context.entries)
    candidates = allowed | entry_tools.keys() if entry_tools else allowed
    by_name = entries_by_name(context.entries)
    whole = best_candidates(routed, candidates, by_name) if routed.needs_tool and not expression_only else []
    # Every step first: the request's best tool, then each clause's best not yet picked, then the request's
    # other near-best candidates (near-duplicates of its strongest step must not crowd out a later step).
    picks += whole[:1]
    for part in parts:
        if part.needs_tool:
            picks += [name for name in best_candidates(part, candidates, by_name) if name not in picks][:1]
    picks += whole[1:]
    picks = stand_in_for_flows(list(dict.fromkeys(picks)), decision, entry_tools)
    if picks and len(picks) > len(reasons):
        reasons.append(f"ranked among the {len(allowed)} tools policy allows for a {decision.action} request")
    return picks[:max_tools], reasons


def best_candidates(routed: Routed, candidates: Collection[str], by_name: Mapping[str, CatalogEntry]) -> list[str]:
    """The permitted tools within RECOMMEND_MARGIN of the best, the best of the decided action first."""
    scored = sorted(
        ((score, name) for name, score in routed.tool_scores.items() if name in candidates),
        key=lambda item: (-item[0], item[1]),
    )
    if not scored:
        return []
    best = scored[0][0]
    picks = [name for score, name in scored if score >= best - RECOMMEND_MARGIN][:RECOMMEND_PER_INTENT]
    # The decided action leads: the best candidate whose operation is that action comes first.
    action = routed.decision.action
    # Candidates are names policy allows or flows' first steps (allowed_names, flow_entry_tools): each has a policy.
    matching = [name for _, name in scored if ACTION_OF_OPERATION.get(by_name[name].policy.operation) == action]  # type: ignore[union-attr]
    if matching:
        picks = [matching[0], *(name for name in picks if name != matching[0])][:RECOMMEND_PER_INTENT]
    return picks


def fill(
    text: str, parts: list[Routed], allowed: Collection[str], context: StewardContext, picks: list[str], wanted: int
) -> list[str]:
    """Up to `wanted` more permitted tools: the search's ranking of the request and, when it has several clauses,
    each clause's own ranking (already made by the router: no search more), taken in turn so that each step gets
    its next candidate before any step gets two."""
    limit = wanted + len(picks)
    rankings = [context.search(text, allowed, limit)]
    for part in parts:
        scored = sorted(((-score, name) for name, score in part.tool_scores.items() if name in allowed))
        rankings.append([name for _, name in scored[:limit]])
    found: list[str] = []
    for rank in range(limit):
        for ranking in rankings:
            if rank < len(ranking) and ranking[rank] not in picks and ranking[rank] not in found:
                found.append(ranking[rank])
    return found[:wanted]


def flow_entry_tools(decision: RoutingDecision, entries: Sequence[CatalogEntry]) -> dict[str, Flow]:
    """The first-step tools of the staged flows this decision could start (flow_to_start's rule)."""
    if decision.phase or decision.action != Action.CREATE or decision.confidence < settings.TOOLHUB_MIN_CONFIDENCE:
        return {}
    found: dict[str, Flow] = {}
    for flow in configured_flows():
        first = flow.phases[0]
        for entry in entries:
            policy = entry.policy
            if (
                entry.enabled
                and policy is not None
                and policy.status == "active"
                and policy.workflow_phases == (first,)
            ):
                if entry.name in flow.starts_for and policy.domains & decision.domains:
                    found[entry.name] = flow
    return found


def stand_in_for_flows(picks: list[str], decision: RoutingDecision, entry_tools: Mapping[str, Flow]) -> list[str]:
    """A flow stands in for its one-shot tools: recommend its first step instead, never both."""
    flows_hit = {flow for name, flow in entry_tools.items() if flow.starts_for & set(picks)}
    if not flows_hit:
        return [name for name in picks if name not in entry_tools]
    replaced = {name for flow in flows_hit for name in flow.starts_for}
    first_steps = [name for name, flow in entry_tools.items() if flow in flows_hit]
    return list(dict.fromkeys(first_steps + [name for name in picks if name not in replaced]))


def classify(recommended: Sequence[str]) -> tuple[str, bool, str, str]:
    """(intent, silent, injected context, reason) from what is recommended, the first pick leading."""
    if not recommended:
        return Intent.GENERAL, False, "", "general knowledge: no tool needed"
    first = recommended[0]
    clocks = any(name in settings.TOOLHUB_CLOCK_TOOLS for name in recommended)
    injected = current_time_context() if clocks else ""
    if first == settings.TOOLHUB_CALCULATOR_TOOL:
        return Intent.MATH, False, injected, ""
    if first in settings.TOOLHUB_CLOCK_TOOLS:
        return Intent.TIME, True, injected, "a date/time question: the current time is injected"
    if first == settings.TOOLHUB_WEB_SEARCH_TOOL:
        return Intent.REALTIME, False, injected, "a real-time question recommends web search"
    return Intent.TOOLS, False, injected, ""


def with_recommendations(
    result: "StewardResult", recommended: Sequence[str], reasoning: str, mode: str
) -> "StewardResult":
    """The result with new recommendations; intent and the silent time injection follow them."""
    intent, silent, injected, _ = classify(recommended)
    return replace(
        result,
        recommended_tools=tuple(recommended),
        requires_assistance=bool(recommended),
        intent=intent,
        silent=silent,
        context=injected,
        reasoning=reasoning,
        mode=mode,
    )


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
    text = routable_text(text)
    if not text:
        decision = RoutingDecision(phase=state.workflow_phase, side_query=bool(state.workflow_phase))
        result = StewardResult(Intent.GENERAL, decision, (), "", False, StewardMode.RULES, 0.0)
        return with_recommendations(result, (), "an empty request: nothing to route", StewardMode.RULES)
    routed, parts = route(without_quotes(text), state, context)
    picks, reasons = recommend(routed, parts, text, context, max_tools=max_tools)
    if len(picks) < min_tools:
        allowed = allowed_names(routed.decision, context.entries)
        found = fill(text, parts, allowed, context, picks, min_tools - len(picks))
        picks += found
        if found:
            reasons.append(f"search over the {len(allowed)} tools policy allows")
    intent, silent, injected, reason = classify(picks)
    if reason:
        reasons.append(reason)
    return StewardResult(
        intent=intent,
        decision=routed.decision,
        recommended_tools=tuple(picks[:max_tools]),
        reasoning="; ".join(reasons),
        requires_assistance=bool(picks),
        mode=StewardMode.RULES,
        latency_ms=(time.perf_counter() - started) * 1000,
        silent=silent,
        context=injected,
    )
