"""Proposed policies for tools awaiting review: operation, risk, domains and confirmation, each with its evidence.

Pure: plain values in (`ToolFacts` of the tool, `ReviewedTool`s of every tool with an active policy), a `Proposal`
out. It never reads or writes the database and never activates anything: an operator accepts, edits or rejects
each proposal on the review page (catalog.policies.review writes what they accept). A proposal reads names and
words, which the routing rules never do (DESIGN.md): here they are evidence shown to a person, not a decision.

Operation, strongest evidence first:

1. the tool's own draft policy (its values before its schema changed, or an import's draft): kept, since a person
   or an import wrote it;
2. MCP annotations, over the name: readOnlyHint true -> a read-only kind; destructiveHint true -> a write (the
   name's write verb, else delete); readOnlyHint false -> a write (the name's, else update when idempotentHint
   is true, else execute). A hint that is not a boolean is ignored and said so;
3. the verb of the name (its first word, after "bulk"), from VERBS;
4. the schema, only to choose among read-only kinds (paging fields -> list, a query field -> search): a schema
   alone never makes a tool read-only, since read-only tools are offered for any request;
5. nothing known -> execute at high risk with confirmation: what MCP assumes of a tool that says nothing (not
   read-only, may be destructive), so every call waits for an approval and four eyes apply.

Risk: read-only kinds low (medium when the name's verb writes though readOnlyHint says not), create, update and
execute medium, delete high; destructiveHint, "bulk" and the verbs of HARD_TO_UNDO raise it to high; never below
the tool's draft policy. Confirmation: required at high and critical risk (the bundle denies such a tool
without it) or when the draft policy had it.

Domains: the draft policy's if it has some; else the domains of the nearest reviewed tools (`ReviewedIndex`:
tf-idf cosine over the words of names, descriptions and schema fields; the nearest tool's domains, and those
shared by NEIGHBOURS_AGREEING of the NEIGHBOURS nearest) and the domains most reviewed tools of the same MCP
server have (SERVER_MAJORITY). Words rather than the search index's dense vectors: proposing each demo tool's
domains from the other 98 found exactly its domains for 82 either way, but MiniLM took 20 s to embed the 99 tools
where the words take under 40 ms (docs/pages.md), and no model loads in the web process.
"""

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from catalog.models import READ_ONLY_OPERATIONS, Operation, Risk
from catalog.search.index import STOPWORDS, name_words, words

from .bundle import HIGH_RISKS

# The verb of a name -> the operation it usually means.
VERBS: Mapping[str, str] = {
    **dict.fromkeys(
        "get read fetch show describe view retrieve inspect check validate verify preview count explain "
        "estimate simulate test calculate compute convert".split(),
        Operation.READ,
    ),
    **dict.fromkeys("list enumerate browse".split(), Operation.LIST),
    **dict.fromkeys("search find query lookup look".split(), Operation.SEARCH),
    **dict.fromkeys(
        "create add new insert register make duplicate copy clone upload generate".split(), Operation.CREATE
    ),  # fmt: skip
    **dict.fromkeys(
        "update set edit modify change rename patch put replace adjust assign archive restore promote demote "
        "upgrade downgrade tag label mark upsert save configure attach link merge restock".split(),
        Operation.UPDATE,
    ),
    **dict.fromkeys(
        "delete remove drop destroy purge erase wipe clear truncate detach unlink".split(), Operation.DELETE
    ),  # fmt: skip
    **dict.fromkeys(
        "run execute send trigger start launch stop pause resume cancel apply issue award grant revoke redeem "
        "transfer import export sync approve reject publish enable disable invoke call notify email pay charge "
        "refund deploy restart schedule book submit process activate deactivate enroll recalculate deduct "
        "expire void terminate kill shutdown".split(),
        Operation.EXECUTE,
    ),
}
# Verbs whose effect is hard to undo (money or points moved, services stopped, records voided): high risk.
HARD_TO_UNDO = frozenset(
    "transfer void revoke expire purge wipe destroy terminate kill shutdown restart stop deploy pay refund "
    "charge".split()
)
BULK = "bulk"
PAGING_FIELDS = frozenset({"page", "page_size", "per_page", "limit", "offset", "cursor", "next_token", "page_token"})
QUERY_FIELDS = frozenset({"query", "q", "search", "keyword", "keywords", "text"})
BASE_RISK: Mapping[str, str] = {
    **dict.fromkeys(READ_ONLY_OPERATIONS, Risk.LOW),
    Operation.CREATE: Risk.MEDIUM,
    Operation.UPDATE: Risk.MEDIUM,
    Operation.EXECUTE: Risk.MEDIUM,
    Operation.DELETE: Risk.HIGH,
}
IGNORED_WORDS = STOPWORDS | frozenset(VERBS) | {BULK}
RISK_ORDER = tuple(Risk.values)  # low < medium < high < critical
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")

NEIGHBOURS = 3  # nearest reviewed tools read for domains
NEIGHBOURS_AGREEING = 2  # a domain of this many of them is proposed too (the nearest one's always are)
MIN_SIMILARITY = 0.15  # a reviewed tool nearer than this is no evidence
SERVER_MAJORITY = 0.6  # a domain of at least this share of a server's reviewed tools is proposed for its new ones
TEXT_CHARS = 2000  # of a description read for words (a description may be 100,000 characters)
SHOWN_NEIGHBOURS = 3


@dataclasses.dataclass(frozen=True)
class ToolFacts:
    """What the proposer reads of a tool awaiting review. `draft` is its draft policy's snapshot, if it has one."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, Any] | None = None
    upstream_name: str = ""  # the name its MCP server calls it by (the catalog's may carry a prefix__)
    server: str = ""  # the MCP server serving it; "" for other tools
    draft: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class ReviewedTool:
    """A tool with an active policy: evidence of the domains its neighbours belong to."""

    name: str
    domains: frozenset[str]
    description: str = ""
    input_schema: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    server: str = ""


@dataclasses.dataclass(frozen=True)
class Proposal:
    tool: str
    operation: str
    risk: str
    domains: tuple[str, ...]
    requires_confirmation: bool
    evidence: tuple[str, ...]

    def snapshot(self, status: str) -> dict[str, Any]:
        """The proposal as a policy snapshot (catalog.policies.versions) of `status`; a draft's phases and aliases
        are kept by the caller."""
        return {
            "status": status,
            "operation": self.operation,
            "risk": self.risk,
            "domains": sorted(self.domains),
            "workflow_phases": [],
            "aliases": [],
            "requires_confirmation": self.requires_confirmation,
        }


def _rank(risk: str) -> int:
    return RISK_ORDER.index(risk) if risk in RISK_ORDER else len(RISK_ORDER) - 1


def higher_risk(*risks: str) -> str:
    return RISK_ORDER[max(_rank(risk) for risk in risks)]


def _name_words(facts: ToolFacts) -> list[str]:
    return words(name_words(facts.upstream_name or facts.name))


def _fields(schema: Mapping[str, Any]) -> set[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return {str(name).lower() for name in properties} if isinstance(properties, Mapping) else set()


def _hint(annotations: Mapping[str, Any] | None, name: str, evidence: list[str]) -> bool | None:
    if not isinstance(annotations, Mapping) or name not in annotations:
        return None
    value = annotations[name]
    if isinstance(value, bool):
        evidence.append(f"{name}: {'true' if value else 'false'}")
        return value
    evidence.append(f"{name} is not a boolean ({str(value)[:40]!r}): ignored")
    return None


@dataclasses.dataclass(frozen=True)
class _Verb:
    word: str | None  # the name's first word (after "bulk"), if any
    operation: str | None  # what VERBS says it means, if it knows the word
    bulk: bool


def _verb(facts: ToolFacts, evidence: list[str]) -> _Verb:
    """The name's verb; "bulk_" is read as a modifier before it."""
    parts = _name_words(facts)
    bulk = bool(parts) and parts[0] == BULK
    if bulk:
        evidence.append(f"name starts with {BULK}_: acts on many records at once")
        parts = parts[1:]
    word = parts[0] if parts else None
    operation = VERBS.get(word) if word else None
    if operation is not None:
        evidence.append(f"name {'continues' if bulk else 'starts'} with {word}_ ({operation})")
    elif len(parts) > 1 and VERBS.get(parts[-1]) in READ_ONLY_OPERATIONS:  # web_search, dns_lookup
        word, operation = parts[-1], VERBS[parts[-1]]
        evidence.append(f"name ends with _{word} ({operation})")
    return _Verb(word, operation, bulk)


def _read_only_kind(facts: ToolFacts, verb_operation: str | None, evidence: list[str]) -> str:
    if verb_operation in (Operation.LIST, Operation.SEARCH):
        return verb_operation
    fields = _fields(facts.input_schema)
    paging = sorted(fields & PAGING_FIELDS)
    query = sorted(fields & QUERY_FIELDS)
    if query and verb_operation is None:
        evidence.append(f"schema has a query field ({', '.join(query)}): search")
        return Operation.SEARCH
    if paging:
        evidence.append(f"schema has paging fields ({', '.join(paging)}): list")
        return Operation.LIST
    return Operation.READ


def _operation_and_risk(facts: ToolFacts, evidence: list[str]) -> tuple[str, str]:
    hints = facts.annotations
    read_only = _hint(hints, "readOnlyHint", evidence)
    destructive = _hint(hints, "destructiveHint", evidence)
    idempotent = _hint(hints, "idempotentHint", evidence)
    if _hint(hints, "openWorldHint", evidence):
        evidence[-1] += " (reaches systems outside the server)"
    named = _verb(facts, evidence)
    verb, verb_operation = named.word, named.operation
    # The name's write operation (create, update, delete, execute), if its verb names one.
    verb_write = verb_operation if verb_operation not in (None, *READ_ONLY_OPERATIONS) else None
    operation: str
    risk: str
    if read_only is True:
        operation, risk = _read_only_kind(facts, verb_operation, evidence), Risk.LOW
        if verb_write:
            risk = Risk.MEDIUM
            evidence.append(f"the name's verb {verb} writes though readOnlyHint says not: risk medium")
    elif destructive is True:
        operation, risk = verb_write or Operation.DELETE, Risk.HIGH
        evidence.append("destructive: risk high")
    elif read_only is False:
        operation = verb_write or (Operation.UPDATE if idempotent else Operation.EXECUTE)
        if not verb_write:
            evidence.append(f"readOnlyHint false and {'an idempotent' if idempotent else 'no'} write verb: {operation}")
        risk = BASE_RISK[operation]
    elif verb_operation is not None:
        operation = verb_write or _read_only_kind(facts, verb_operation, evidence)
        risk = BASE_RISK[operation]
    else:
        operation, risk = Operation.EXECUTE, Risk.HIGH
        said = f"an unknown verb ({verb}_)" if verb else "no verb"
        evidence.append(f"no behaviour hints and {said}: taken as a write that may destroy (the MCP default)")
    hard_to_undo = named.bulk or verb in HARD_TO_UNDO
    if operation not in READ_ONLY_OPERATIONS and hard_to_undo and _rank(risk) < _rank(Risk.HIGH):
        risk = Risk.HIGH
        evidence.append(f"{BULK if named.bulk else verb} is hard to undo: risk high")
    return operation, risk


class ReviewedIndex:
    """The reviewed tools by their words (tf-idf, cosine), and each MCP server's reviewed tools' domains."""

    def __init__(self, reviewed: Iterable[ReviewedTool]):
        self.tools = list(reviewed)
        documents = [_tokens(tool.name, tool.description, tool.input_schema) for tool in self.tools]
        frequency: Counter[str] = Counter(token for document in documents for token in set(document))
        count = len(documents)
        self.idf = {token: math.log((count + 1) / (df + 1)) + 1 for token, df in frequency.items()}
        self.default_idf = math.log(count + 1) + 1
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for position, document in enumerate(documents):
            for token, weight in self._vector(document).items():
                self.postings[token].append((position, weight))
        self.servers: dict[str, list[ReviewedTool]] = defaultdict(list)
        for tool in self.tools:
            if tool.server:
                self.servers[tool.server].append(tool)

    def _vector(self, tokens: Sequence[str], *, known_only: bool = False) -> dict[str, float]:
        """tf-idf, unit length; `known_only`: over the words some reviewed tool has (a word none has is no evidence
        of a neighbour, and would only lower every similarity)."""
        counts = Counter(token for token in tokens if not known_only or token in self.idf)
        vector = {t: (1 + math.log(n)) * self.idf.get(t, self.default_idf) for t, n in counts.items()}
        norm = math.sqrt(sum(weight * weight for weight in vector.values())) or 1.0
        return {token: weight / norm for token, weight in vector.items()}

    def nearest(self, facts: ToolFacts, count: int = NEIGHBOURS) -> list[tuple[ReviewedTool, float]]:
        """The `count` reviewed tools most like `facts` (cosine at least MIN_SIMILARITY), nearest first; the
        tool itself (a name it shares) is left out."""
        scores: dict[int, float] = defaultdict(float)
        tokens = _tokens(facts.upstream_name or facts.name, facts.description, facts.input_schema)
        query = self._vector(tokens, known_only=True)
        for token, weight in query.items():
            for position, other in self.postings.get(token, ()):
                scores[position] += weight * other
        ranked = sorted(
            ((self.tools[p], score) for p, score in scores.items() if score >= MIN_SIMILARITY),
            key=lambda pair: (-pair[1], pair[0].name),
        )
        return [(tool, score) for tool, score in ranked if tool.name != facts.name][:count]

    def server_domains(self, server: str) -> tuple[list[str], int]:
        """(domains of at least SERVER_MAJORITY of the server's reviewed tools, how many it has)."""
        siblings = self.servers.get(server, [])
        counts: Counter[str] = Counter(domain for tool in siblings for domain in tool.domains)
        majority = [d for d, n in sorted(counts.items()) if siblings and n / len(siblings) >= SERVER_MAJORITY]
        return majority, len(siblings)


def _tokens(name: str, description: str, schema: Mapping[str, Any]) -> list[str]:
    """A tool's words for finding its neighbours: its name's twice (names are dense in meaning), its description's
    and its fields', without the verbs (they say what a tool does, not what it is about)."""
    named = words(name_words(name))
    text = words(description[:TEXT_CHARS]) + [w for field in sorted(_fields(schema)) for w in words(field)]
    return [_singular(w) for w in named + named + text if len(w) > 1 and not w.isdigit() and w not in IGNORED_WORDS]


def _singular(word: str) -> str:
    """members -> member, categories -> category: a plural and its singular are one word here."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _domains(facts: ToolFacts, index: ReviewedIndex, evidence: list[str]) -> list[str]:
    near = index.nearest(facts)
    proposed: set[str] = set()
    if near:
        shown = ", ".join(f"{tool.name} ({', '.join(sorted(tool.domains)) or 'no domain'})"
                          for tool, _ in near[:SHOWN_NEIGHBOURS])  # fmt: skip
        evidence.append(f"nearest reviewed tools: {shown}")
        votes: Counter[str] = Counter(domain for tool, _ in near for domain in tool.domains)
        proposed |= near[0][0].domains | {d for d, n in votes.items() if n >= NEIGHBOURS_AGREEING}
    if facts.server:
        majority, siblings = index.server_domains(facts.server)
        if majority:
            evidence.append(f"server {facts.server}: most of its {siblings} reviewed tools have {', '.join(majority)}")
            proposed |= set(majority)
        else:
            evidence.append(f"server {facts.server}: {siblings or 'none'} of its tools reviewed, no common domain")
    if not proposed:
        evidence.append("no reviewed tool is near: no domain proposed")
    return sorted(proposed)


def propose_policy(facts: ToolFacts, index: ReviewedIndex) -> Proposal:
    """The policy the evidence points to for a tool awaiting review (the module docstring says how)."""
    evidence: list[str] = []
    operation, risk = _operation_and_risk(facts, evidence)
    draft = facts.draft
    confirm = False
    if draft is not None:
        before = f"{draft['operation']}, risk {draft['risk']}, domains {', '.join(draft['domains']) or 'none'}"
        evidence.append(f"its draft policy: {before}")
        if draft["operation"] != operation:
            evidence.append(f"kept the draft's operation {draft['operation']} over {operation}")
        operation, risk = draft["operation"], higher_risk(risk, draft["risk"])
        confirm = bool(draft["requires_confirmation"])
    domains = list(draft["domains"]) if draft is not None and draft["domains"] else _domains(facts, index, evidence)
    return Proposal(
        tool=facts.name,
        operation=operation,
        risk=risk,
        domains=tuple(domains),
        requires_confirmation=confirm or risk in HIGH_RISKS,
        evidence=tuple(evidence),
    )
