"""Fusion: the signals of one request -> its RoutingDecision and a score for every candidate tool.

Three signals vote, each as shares that sum to one:

- neighbours (examples.py): the nearest labelled examples by meaning; the only
  signal that knows "answered with no tool" (general knowledge);
- ranking: the hybrid tool search over the whole catalog (dense + BM25 + tool
  examples); the top tools' policies vote their operation (as an action) and
  their domains; the structure of the policies, not their names;
- lexicon (lexicon.py): phrase lists, weakest; its mood cues say whether the
  request is a question that asks for no action, which never decides a write.

action = argmax of the weighted votes; domains = those within DOMAIN_SHARE of the
best domain's votes; the raw confidence is the winning action's share times the
share of "needs a tool"; calibration.py maps it to the probability that the
decision is right, measured on data. A request with several clauses ("list the
campaigns and tell me the time") is split where a clause boundary is and each
clause is routed alone (segments()); steward.py merges them.
"""

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from catalog.models import Action
from catalog.policies.decision import RoutingDecision

from . import calibration
from .lexicon import ACTION_OF_OPERATION, READ_ACTIONS, Hits
from .nearest_examples import Neighbours

# How much each signal weighs (sum 1). Round numbers, chosen on routing_dev (bench/results/2026-12-benchmark-notes.md).
NEIGHBOUR_WEIGHT = 0.5
RANKING_WEIGHT = 0.35
LEXICON_WEIGHT = 0.15
# The lexicon's weight when the request opens with an action phrase (Hits.lead_action).
LEAD_WEIGHT = 0.3
# The ranking's votes: the top RANKING_DEPTH tools, softmax of their scores at this temperature.
RANKING_DEPTH = 8
RANKING_TEMPERATURE = 0.03
# A candidate tool's score: its hybrid rank score, plus these for its share of the nearest
# examples and for an alias of it in the text.
NEIGHBOUR_TOOL_BONUS = 0.3
ALIAS_TOOL_BONUS = 0.03
# A domain is the request's when its votes reach this share of the best domain's.
DOMAIN_SHARE = 0.5
# With examples present, a request needs no tool when their "answer" share reaches this.
ANSWER_SHARE = 0.5
# A write's raw confidence is scaled down until its non-ranking votes reach this.
WRITE_WITNESS = 0.1
# A question that asks for no action and still reads as a write keeps this share of its confidence.
QUESTION_WRITE_FACTOR = 0.5
# A write inside a workflow continues it: the flow passed the confidence gate when it started,
# so its steps do not face the gate again (a constant below the calibrated gate would stall every
# flow at its second step whenever a recalibration raised the gate).
CONFIDENCE_IN_WORKFLOW = 1.0


@dataclass(frozen=True)
class ConversationState:
    """What the router needs to know about the conversation: its active workflow, if any."""

    workflow_kind: str = ""
    workflow_phase: str = ""
    workflow_action: str = ""  # the action the workflow carries out, e.g. create


@dataclass
class Evidence:
    """Everything known about one text (a whole request or one of its clauses)."""

    text: str
    neighbours: Neighbours
    ranking: list[tuple[str, float]]  # (tool, hybrid score), best first, over the whole catalog
    hits: Hits
    operations: dict[str, str]  # tool -> operation, for the tools of the ranking
    domains_of: dict[str, frozenset[str]]
    # (tool, score) by both embedding models, for the candidates' scores (StewardContext.rank); None: `ranking`'s.
    tool_ranking: list[tuple[str, float]] | None = None


@dataclass
class Routed:
    """The fused reading of one text: its decision, whether it needs a tool, and candidate scores."""

    decision: RoutingDecision
    needs_tool: bool
    raw_confidence: float
    tool_scores: dict[str, float] = field(default_factory=dict)
    reads_only: bool = False  # the text wants to read (lexicon.Hits.reads_only)
    question: bool = False  # the text is a question (lexicon.Hits.question)
    text: str = ""  # what was read (a clause's own words)


def _shares(counter: Mapping[str, float]) -> dict[str, float]:
    total = sum(value for value in counter.values() if value > 0)
    return {key: value / total for key, value in counter.items() if value > 0} if total else {}


def ranking_votes(evidence: Evidence) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(tool shares, action shares, domain shares) from the top of the hybrid ranking."""
    top = evidence.ranking[:RANKING_DEPTH]
    if not top:
        return {}, {}, {}
    best = top[0][1]
    weights = {name: math.exp((score - best) / RANKING_TEMPERATURE) for name, score in top}
    tools = _shares(Counter(weights))
    actions: Counter[str] = Counter()
    domains: Counter[str] = Counter()
    for name, share in tools.items():
        actions[ACTION_OF_OPERATION[evidence.operations[name]]] += share  # type: ignore[assignment]  # float shares: typeshed's Counter counts ints only
        for domain in evidence.domains_of.get(name, ()):
            domains[domain] += share  # type: ignore[assignment]  # float shares, as above
    return tools, dict(actions), _shares(domains)


def fuse(evidence: Evidence, state: ConversationState) -> Routed:
    """The decision for one text; pure, so it is tested without a database or a model."""
    neighbours = evidence.neighbours
    tools, rank_actions, rank_domains = ranking_votes(evidence)
    lex_actions, lex_domains = _shares(evidence.hits.actions), _shares(evidence.hits.domains)
    lexicon_weight = LEXICON_WEIGHT
    if evidence.hits.lead_action and evidence.hits.domains:
        # The verb a request opens with, on an object the catalog knows, is its action ("create
        # a campaign ... running Aug 1-31"): the phrase lists then vote for it alone, with more
        # weight (still outvoted by the others). "create something for me" names no object.
        lex_actions = {evidence.hits.lead_action: 1.0}
        lexicon_weight = LEAD_WEIGHT

    weights = {"neighbours": NEIGHBOUR_WEIGHT, "ranking": RANKING_WEIGHT, "lexicon": lexicon_weight}
    if neighbours.empty:
        weights["neighbours"] = 0.0
    if not lex_actions and not lex_domains:
        weights["lexicon"] = 0.0
    total = sum(weights.values()) or 1.0
    weights = {key: value / total for key, value in weights.items()}

    actions: Counter[str] = Counter()
    for source, votes in (
        ("neighbours", _shares(neighbours.actions)),
        ("ranking", rank_actions),
        ("lexicon", lex_actions),
    ):
        for action, share in votes.items():
            actions[action] += weights[source] * share  # type: ignore[assignment]  # float votes: typeshed's Counter counts ints only
    domain_votes: Counter[str] = Counter()
    for source, votes in (
        ("neighbours", _shares(neighbours.domains)),
        ("ranking", rank_domains),
        ("lexicon", lex_domains),
    ):
        for domain, share in votes.items():
            domain_votes[domain] += weights[source] * share  # type: ignore[assignment]  # float votes, as above

    # Only the examples know "no tool"; without them every request may need one.
    answer_share = neighbours.answer if not neighbours.empty else 0.0
    needs_tool = answer_share < ANSWER_SHARE and bool(evidence.ranking or neighbours.tools)
    tool_actions = {a: v for a, v in actions.items() if a != Action.ANSWER}
    if needs_tool and tool_actions:
        action = max(tool_actions, key=lambda a: (tool_actions[a], a in READ_ACTIONS))
        if action not in READ_ACTIONS and evidence.hits.reads_only:
            # A request that opens with a read verb, or a question that asks for no action ("does
            # M-42 still have points?"), wants to read: its best read action decides, or, with no
            # read in sight, the write stays unconfident.
            reads = {a: v for a, v in tool_actions.items() if a in READ_ACTIONS}
            if reads:
                action = max(reads, key=reads.get)  # type: ignore[arg-type]  # every key of reads is in it: .get never returns None
        raw = tool_actions[action] / sum(tool_actions.values()) * (1.0 - answer_share)
        if action not in READ_ACTIONS and evidence.hits.reads_only:
            raw *= QUESTION_WRITE_FACTOR
        if action not in READ_ACTIONS:
            # A write needs a witness besides the ranking (an operator's example or a phrase):
            # examples learned from traffic lift tools in the ranking, and must not make a write.
            support = weights["neighbours"] * _shares(neighbours.actions).get(action, 0.0)
            support += weights["lexicon"] * lex_actions.get(action, 0.0)
            raw *= min(1.0, support / WRITE_WITNESS)
            if not evidence.hits.names_object:
                # "delete it", "xóa nó đi": what it would change is not in the request. Fail closed: no write.
                raw = 0.0
        best_domain = max(domain_votes.values(), default=0.0)
        domains = frozenset(d for d, v in domain_votes.items() if v >= DOMAIN_SHARE * best_domain and v > 0)
    else:
        action, raw, domains, needs_tool = Action.ANSWER, answer_share, frozenset(), False

    tool_scores = dict(evidence.ranking if evidence.tool_ranking is None else evidence.tool_ranking)
    for name, share in neighbours.tools.items():
        tool_scores[name] = tool_scores.get(name, 0.0) + NEIGHBOUR_TOOL_BONUS * share
    for name in evidence.hits.tools:
        tool_scores[name] = tool_scores.get(name, 0.0) + ALIAS_TOOL_BONUS

    confidence = calibration.calibrated(raw)
    decision = RoutingDecision(action=action, domains=domains, confidence=confidence)
    if state.workflow_phase:
        decision = in_workflow(decision, state, asks_to_read=evidence.hits.reads_only or evidence.hits.question)
    return Routed(
        decision,
        needs_tool,
        raw,
        tool_scores,
        reads_only=evidence.hits.reads_only,
        question=evidence.hits.question,
        text=evidence.text,
    )


def in_workflow(decision: RoutingDecision, state: ConversationState, *, asks_to_read: bool = True) -> RoutingDecision:
    """Inside a workflow a read question (or a request that opens with a read verb) is a side
    query; anything else continues the workflow ("save it" reads as nothing in particular)."""
    if decision.action in READ_ACTIONS and asks_to_read:
        return RoutingDecision(
            decision.action, decision.domains, decision.confidence, phase=state.workflow_phase, side_query=True
        )
    return RoutingDecision(
        action=state.workflow_action or decision.action,
        domains=decision.domains,
        confidence=max(decision.confidence, CONFIDENCE_IN_WORKFLOW),
        phase=state.workflow_phase,
    )


# Clause boundaries: a sentence end, a semicolon, or a connective between clauses (a bare
# comma is not one: "189k, add 10% VAT, total?" is one request). The connectives are a few
# closed-class words that join or order steps (and, also, then, plus, after that; và, rồi,
# còn, với lại, thêm nữa, sau đó, tiếp theo, cuối cùng); "finally", "lastly" and "afterwards"
# only after a comma ("I finally got it" is one clause). A clause loses the connective it opens with.
_BOUNDARY = re.compile(
    r"(?<=[.;?!])\s+"
    r"|\s*,?\s+(?:and\s+also|and\s+then|and\s+finally|after\s+that|and|also|then|plus"
    r"|và|rồi|còn|với lại|thêm nữa|sau đó|tiếp theo|cuối cùng)\s*,?\s+"
    r"|\s*,\s*(?:finally|lastly|afterwards)\s*,?\s+",
    re.IGNORECASE,
)
_OPENING_CONNECTIVE = re.compile(
    r"^(?:and\s+then|and\s+finally|after\s+that|afterwards|then|finally|lastly|also"
    r"|sau đó|tiếp theo|cuối cùng|rồi)\b\s*,?\s*",
    re.IGNORECASE,
)
# A request of several steps ("... Then ... Lastly ...") has up to this many clauses read apart; the public multi-step
# benchmarks need up to six tools a request.
MAX_SEGMENTS = 6
MIN_SEGMENT_WORDS = 2
# "M-10 and M-11", "SUMMER24 và TET25", "Tokyo and Paris": a bare "and" between two names or ids joins two things
# one request is about, it does not start a second request. A name is a capitalised word that does not open the text.
_JOINING = re.compile(r"\s*(?:and|và|plus)\s+", re.IGNORECASE)
_NAME_OR_ID_WORD = re.compile(r"(?:[A-ZĐ][\w'’.-]*|[A-Za-z]+-?\d[\w-]*|\d+[A-Za-z][\w-]*)$")


def _joins_two_names(text: str, boundary: re.Match[str]) -> bool:
    if not _JOINING.fullmatch(boundary.group()):
        return False
    before, after = text[: boundary.start()].split(), text[boundary.end() :].split()
    if len(before) < 2 or not after:  # the text's first word is capitalised whatever it is
        return False
    return all(_NAME_OR_ID_WORD.match(word.strip("\"'“”?!.,;:")) for word in (before[-1], after[0]))


def segments(text: str) -> list[str]:
    """The clauses of a request that could each be a request on its own (at most MAX_SEGMENTS).

    A clause that ends with a question mark keeps it."""
    text = text or ""
    cuts = [match for match in _BOUNDARY.finditer(text) if not _joins_two_names(text, match)]
    starts, ends = [0, *(match.end() for match in cuts)], [*(match.start() for match in cuts), len(text)]
    # A clause keeps its question mark: cut off from the rest, it is still a question.
    parts = [text[start:end].strip(" ,.;!") for start, end in zip(starts, ends, strict=True)]
    parts = [_OPENING_CONNECTIVE.sub("", part) for part in parts]
    parts = [part for part in parts if len(part.split()) >= MIN_SEGMENT_WORDS]
    if len(parts) < 2:
        return []
    return parts[:MAX_SEGMENTS]
