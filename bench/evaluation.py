"""Routing benchmark: read the bench files, rank metrics, baselines; used by route_eval and route_bench.

Pure functions over plain values; they never touch the database and never
adjust anything to the queries they score.
"""

import functools
import gzip
import hashlib
import json
import random
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
from django.conf import settings

from agents.router import StewardContext
from agents.router.lexicon import Lexicon
from agents.router.rules import RANKING_EXAMPLE_WEIGHT, RANKING_LIMIT, pairs
from catalog.policies.decision import CatalogEntry, PolicyView
from catalog.search import embeddings
from catalog.search.ensemble import rank_both
from catalog.search.index import (
    STOPWORDS,
    ExampleDocument,
    ToolDocument,
    ToolSearchIndex,
    full_text,
    name_words,
    words,
)


class BenchFileError(ValueError):
    """A malformed catalog or queries file; the message names the file and line."""

    def __init__(self, path, line: int, message: str):
        super().__init__(f"{path}, line {line}: {message}")
        self.path, self.line = str(path), line


@dataclass(frozen=True)
class BenchQuery:
    id: str
    query: str
    expected_tools: tuple[str, ...]
    source: str


def load_catalog(path) -> list[dict]:
    """A JSON list of tools {name, description, parameters, ...}; names unique."""
    text = _read(path)
    tools, seen = [], set()
    for line, item in _json_array_items(path, text):
        if not isinstance(item, dict):
            raise BenchFileError(path, line, "each tool must be a JSON object")
        name, description = item.get("name"), item.get("description")
        if not isinstance(name, str) or not name.strip():
            raise BenchFileError(path, line, "tool has no 'name' string")
        if not isinstance(description, str):
            raise BenchFileError(path, line, f"tool {name!r} has no 'description' string")
        parameters = item.get("parameters", {})
        if not isinstance(parameters, dict) or not isinstance(parameters.get("properties", {}), dict):
            raise BenchFileError(path, line, f"tool {name!r}: 'parameters' must be a JSON Schema object")
        if name in seen:
            raise BenchFileError(path, line, f"tool name {name!r} appears twice")
        seen.add(name)
        tools.append(item)
    return tools


def load_queries(path, *, known_tools: Collection[str] | None = None) -> list[BenchQuery]:
    """JSONL of {id, query, expected_tools, source}; blank lines are skipped."""
    queries = []
    for line, raw in enumerate(_read(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BenchFileError(path, line, f"not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise BenchFileError(path, line, "each query must be a JSON object")
        query, expected = item.get("query"), item.get("expected_tools")
        if not isinstance(query, str) or not query.strip():
            raise BenchFileError(path, line, "query has no 'query' string")
        if not isinstance(expected, list) or not expected or not all(isinstance(e, str) for e in expected):
            raise BenchFileError(path, line, "'expected_tools' must be a non-empty list of tool names")
        unknown = [e for e in expected if known_tools is not None and e not in known_tools]
        if unknown:
            raise BenchFileError(path, line, f"expected tool(s) not in the catalog: {', '.join(unknown)}")
        identifier = item.get("id", f"line-{line}")
        source = item.get("source") or "unknown"
        queries.append(BenchQuery(str(identifier), query, tuple(dict.fromkeys(expected)), str(source)))
    return queries


def read_requests(path) -> list[dict]:
    """JSONL of requests, each an object with an "id" and a string "query" (other keys kept); blank lines skipped."""
    items = []
    for line, raw in enumerate(_read(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BenchFileError(path, line, f"not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("query"), str) or "id" not in item:
            raise BenchFileError(path, line, 'expected an object with "id" and a string "query"')
        items.append(item)
    return items


def tool_documents(tools: Iterable[dict]) -> list[ToolDocument]:
    """Catalog items as the runtime's search documents (bench items have no policy: no aliases/domains)."""
    return [
        ToolDocument.of(
            item["name"],
            item["description"],
            item.get("parameters"),
            title=item.get("title") or "",
            annotations=item.get("annotations"),
            aliases=item.get("aliases") or (),
            domains=item.get("domains") or (),
            original_name=item.get("original_name") or item["name"],
        )
        for item in tools
    ]


def split_by_id(queries: Sequence[BenchQuery]) -> tuple[list[BenchQuery], list[BenchQuery]]:
    """(history, evaluation): the first byte of sha256(id) even goes to history, odd to evaluation.

    Depends on the id alone, so every run (and every file) splits the same way.
    """
    halves: tuple[list[BenchQuery], list[BenchQuery]] = ([], [])
    for query in queries:
        halves[hashlib.sha256(query.id.encode()).digest()[0] % 2].append(query)
    return halves


def history_examples(history: Iterable[BenchQuery]) -> list[ExampleDocument]:
    """Each past query as an approved example of each of its expected tools; the key is the query's id."""
    return [ExampleDocument(tool=name, text=q.query, key=q.id) for q in history for name in q.expected_tools]


class SelfMatches:
    """Which history examples a benchmark query must not see: those with its id or its exact text."""

    def __init__(self, history: Iterable[BenchQuery]):
        self.ids_by_text: dict[str, set[str]] = {}
        self.ids: set[str] = set()
        for query in history:
            self.ids.add(query.id)
            self.ids_by_text.setdefault(query.query, set()).add(query.id)

    def of(self, query: BenchQuery) -> frozenset[str]:
        same_id = {query.id} if query.id in self.ids else set()
        return frozenset(same_id | self.ids_by_text.get(query.query, set()))


def scaled_catalog(tools: Sequence[dict], size: int, *, seed: int = 0) -> list[dict]:
    """`size` tools: a seeded sample of `tools`, or all of them topped up with generated distractors.

    A distractor has the shape of a random real tool (its parameters, a description of
    the same length) but a name and description drawn from the catalog's own words.
    """
    rng = random.Random(seed)
    if size <= len(tools):
        return rng.sample(list(tools), size)
    description_words = sorted({w for tool in tools for w in words(tool["description"]) if len(w) > 2}) or ["tool"]
    name_parts = sorted({w for tool in tools for w in name_words(tool["name"]).split() if len(w) > 2}) or ["tool"]
    catalog = list(tools)
    for number in range(1, size - len(tools) + 1):
        template = rng.choice(tools)
        name = "_".join(rng.choices(name_parts, k=3)) + f"_{number}"
        length = max(4, len(template["description"].split()))
        description = " ".join(rng.choice(description_words) for _ in range(length)).capitalize() + "."
        catalog.append(
            {
                "name": name,
                "description": description,
                "parameters": template.get("parameters") or {"type": "object", "properties": {}},
                "source": "distractor",
                "original_name": name,
            }
        )
    return catalog


def _read(path) -> str:
    """A bench file's text; a name ending in .gz is read through gzip (the larger catalogs ship compressed)."""
    try:
        if str(path).endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise BenchFileError(path, 0, f"cannot read the file ({exc})") from None


def _json_array_items(path, text: str):
    """Yield (line, item) for each element of a top-level JSON array, so errors can name the line."""
    decoder, lines = json.JSONDecoder(), _LineCounter(text)
    position = _skip_space(text, 0)
    if text[position : position + 1] != "[":
        raise BenchFileError(path, lines.at(position), "the catalog must be a JSON list of tools")
    position = _skip_space(text, position + 1)
    if text[position : position + 1] == "]":
        return
    while True:
        try:
            item, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise BenchFileError(path, exc.lineno, f"not valid JSON ({exc.msg})") from None
        yield lines.at(position), item
        position = _skip_space(text, end)
        separator = text[position : position + 1]
        if separator == "]":
            if text[_skip_space(text, position + 1) :]:
                raise BenchFileError(path, lines.at(position), "text after the end of the list")
            return
        if separator != ",":
            raise BenchFileError(path, lines.at(position), "expected ',' or ']' between tools")
        position = _skip_space(text, position + 1)


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


class _LineCounter:
    """Line numbers of increasing positions, counting each newline once (the catalog is megabytes)."""

    def __init__(self, text: str):
        self.text, self.position, self.line = text, 0, 1

    def at(self, position: int) -> int:
        self.line += self.text.count("\n", self.position, position)
        self.position = position
        return self.line


# --- metrics ---------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], expected: Collection[str], k: int) -> float:
    """|expected ∩ top-k| / |expected|."""
    top = set(ranked[:k])
    return sum(name in top for name in expected) / len(expected)


def lenient_recall_at_k(ranked: Sequence[str], expected: Collection[str], k: int, originals: dict[str, str]) -> float:
    """Like recall@k, but a ranked tool with the same original_name as an expected one also counts."""
    top = {originals.get(name, name) for name in ranked[:k]}
    return sum(originals.get(name, name) in top for name in expected) / len(expected)


def completeness_at_k(ranked: Sequence[str], expected: Collection[str], k: int) -> float:
    """1 when every expected tool is in the top k, else 0."""
    top = set(ranked[:k])
    return float(all(name in top for name in expected))


def ndcg_at_k(ranked: Sequence[str], expected: Collection[str], k: int) -> float:
    """Normalised discounted cumulative gain at k, binary relevance."""
    gain = sum(1.0 / np.log2(rank + 1) for rank, name in enumerate(ranked[:k], start=1) if name in expected)
    ideal = sum(1.0 / np.log2(rank + 1) for rank in range(1, min(k, len(expected)) + 1))
    return gain / ideal if ideal else 0.0


def reciprocal_rank(ranked: Sequence[str], expected: Collection[str]) -> float:
    for rank, name in enumerate(ranked, start=1):
        if name in expected:
            return 1.0 / rank
    return 0.0


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(seconds) * 1000.0, q)), 2) if seconds else 0.0


def summarize(
    rankings: Sequence[Sequence[str]], queries: Sequence[BenchQuery], originals: dict[str, str], *, k: int = 5
) -> dict:
    """Mean recall@1/3/5/10/k, NDCG@10, completeness@5/@10 (all expected tools in the top k), lenient recall@k and MRR
    over the ranked lists; recall@k per source and completeness@10 per number of expected tools."""
    ks = sorted({1, 3, 5, 10, k})
    totals = {f"recall@{n}": 0.0 for n in ks} | {f"lenient_recall@{k}": 0.0, "mrr": 0.0}
    totals |= {"ndcg@10": 0.0, "completeness@5": 0.0, "completeness@10": 0.0}
    by_size: dict[str, list[float]] = {}
    per_source: dict[str, dict[str, float]] = {}
    for ranked, query in zip(rankings, queries, strict=True):
        expected = set(query.expected_tools)
        for n in ks:
            totals[f"recall@{n}"] += recall_at_k(ranked, expected, n)
        lenient = lenient_recall_at_k(ranked, expected, k, originals)
        totals[f"lenient_recall@{k}"] += lenient
        totals["mrr"] += reciprocal_rank(ranked, expected)
        totals["ndcg@10"] += ndcg_at_k(ranked, expected, 10)
        totals["completeness@5"] += completeness_at_k(ranked, expected, 5)
        complete = completeness_at_k(ranked, expected, 10)
        totals["completeness@10"] += complete
        size = by_size.setdefault(str(min(len(expected), 3)) + ("+" if len(expected) >= 3 else ""), [0, 0.0])
        size[0] += 1
        size[1] += complete
        source = per_source.setdefault(query.source, {"n": 0, f"recall@{k}": 0.0, f"lenient_recall@{k}": 0.0})
        source["n"] += 1
        source[f"recall@{k}"] += recall_at_k(ranked, expected, k)
        source[f"lenient_recall@{k}"] += lenient
    count = max(1, len(queries))
    result = {key: round(value / count, 4) for key, value in totals.items()}
    result["per_source"] = {
        name: {key: (value if key == "n" else round(value / figures["n"], 4)) for key, value in figures.items()}
        for name, figures in sorted(per_source.items())
    }
    result["completeness@10_by_tools_needed"] = {
        size: {"n": n, "completeness@10": round(total / n, 4)} for size, (n, total) in sorted(by_size.items())
    }
    return result


# --- baselines -------------------------------------------------------------


def name_substring_ranking(query: str, names: Sequence[str], limit: int) -> list[str]:
    """The seed's anti-pattern: tools whose name contains a query word (3+ letters), most words first."""
    query_words = {w for w in words(query) if len(w) >= 3 and w not in STOPWORDS}
    counted = []
    for position, name in enumerate(names):
        lowered = name.lower()
        hits = sum(word in lowered for word in query_words)
        if hits:
            counted.append((-hits, position, name))
    return [name for _, _, name in sorted(counted)[:limit]]


class FullTextBM25:
    """The standard baseline: bm25s with its defaults and English stop words over each tool's full text (the name's
    words, description, parameter names and descriptions, enum values: catalog.search.index.full_text)."""

    def __init__(self, documents: Sequence[ToolDocument]):
        self.names = [d.name for d in documents]
        self.retriever = bm25s.BM25()
        texts = [full_text(d) for d in documents]
        corpus = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
        self.retriever.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        ids = self.retriever.get_tokens_ids(tokens)
        return self.retriever.get_scores_from_ids(ids) if ids else np.zeros(len(self.names), dtype=np.float32)

    def rank(self, query: str, limit: int) -> list[str]:
        scores = self.scores(query)
        top = [i for i in np.argsort(-scores, kind="stable")[:limit] if scores[i] > 0]
        return [self.names[i] for i in top]


def timed(rank: Callable[[str], list[str]], queries: Sequence[BenchQuery]) -> tuple[list[list[str]], list[float]]:
    """Rank every query, timing each call alone."""
    rankings, seconds = [], []
    for query in queries:
        start = time.perf_counter()
        rankings.append(rank(query.query))
        seconds.append(time.perf_counter() - start)
    return rankings, seconds


# The benchmark's permissive policy: every tool may be read, in one domain.
BENCH_POLICY = PolicyView(
    status="active",
    operation="read",
    risk="low",
    domains=frozenset({"bench"}),
    workflow_phases=(),
    aliases=(),
    requires_confirmation=False,
)


def search_and_routing_indexes(documents, *, dense: bool, examples=(), cold=None):
    """(search index, routing index) of a bench catalog, each by its job's model as a live process builds them;
    one index when both jobs use one model. `cold`: indexes whose tool vectors are reused (a warm build embeds
    only the examples)."""
    search_model, routing_model = embeddings.search_model(), embeddings.routing_model()

    def build(model, reuse):
        return ToolSearchIndex(
            documents,
            embeddings=reuse.vectors() if reuse is not None else None,
            embedder=functools.partial(embeddings.embed_texts, model=model) if dense else None,
            examples=examples,
        )

    index = build(search_model, cold[0] if cold else None)
    routing = index if routing_model == search_model else build(routing_model, cold[1] if cold else None)
    return index, routing


def bench_context(
    tools: list[dict],
    index: ToolSearchIndex,
    search=None,
    *,
    routing: ToolSearchIndex | None = None,
    routing_model: str | None = None,
    exclude: Callable[[], Collection[str]] = frozenset,
) -> StewardContext:
    """The steward's view of a benchmark catalog: permissive read policy, no aliases or domain words.

    `routing`: the catalog indexed by the routing model (`routing_model`); with it the steward ranks and reads
    clauses as a live request's does (StewardContext.current: the router's own ranking, its example weight, the
    clause vectors), else it sees the search alone. `search(query, allowed, limit) -> names` replaces the plain
    index search; `exclude()` names the example keys a query must not see (a warm run's self-matches).
    """
    entries = tuple(  # a tuple, as current_catalog() gives the live steward (what is derived from it is kept)
        CatalogEntry(
            name=tool["name"],
            description=tool["description"],
            input_schema=tool.get("parameters") or {},
            schema_tokens=0,
            enabled=True,
            always_load=False,
            deferred=True,
            policy=BENCH_POLICY,
        )
        for tool in tools
    )

    def plain_search(query, allowed, limit):
        return index.search(query, allowed=allowed, limit=limit, exclude_examples=exclude()).names

    rank = embed = embed_tools = None
    if routing is not None:
        # The search model's index orders the candidates too, as StewardContext.current's rank does.
        second = index if index is not routing and index.dense else None
        weight = settings.TOOLHUB_ROUTING_SEARCH_WEIGHT

        def rank(query: str, vector=None, second_vector=None):
            found, both = rank_both(
                query,
                routing,
                second,
                weight=weight if second_vector is not None else 0.0,
                limit=RANKING_LIMIT,
                example_weight=RANKING_EXAMPLE_WEIGHT,
                exclude_examples=exclude(),
                vector=vector,
                second_vector=second_vector,
            )
            return pairs(found), pairs(both)

        if routing.dense:
            embed = functools.partial(embeddings.embed_texts, model=routing_model)
        if second is not None and weight > 0:
            embed_tools = functools.partial(embeddings.embed_texts, model=embeddings.search_model())
    return StewardContext(
        entries=entries,
        search=search or plain_search,
        lexicon=Lexicon({}, {}, {}),
        rank=rank,
        embed=embed,
        embed_tools=embed_tools,
    )


# --- routing cases (routing_dev.jsonl's format) ------------------------------------

# Tools whose first name word is one of these write (the bench's score_routing.py uses the same list).
WRITE_WORDS = frozenset(
    "create update delete set award deduct adjust transfer issue void redeem activate deactivate pause archive "
    "clone enroll merge purge restart start stop upgrade downgrade expire restock submit bulk".split()
)


def case_failures(expect: dict, recommended: Sequence[str], action: str, domains: Collection[str]) -> list[str]:
    """Why a routing case fails (empty: it passes); the keys mean what score_routing.py's docstring says."""
    recommended, domains, why = list(recommended), set(domains), []
    if "includes" in expect and not all(t in recommended for t in expect["includes"]):
        why.append("missing " + ",".join(t for t in expect["includes"] if t not in recommended))
    if "includes_any" in expect and not any(t in recommended for t in expect["includes_any"]):
        why.append("none of " + ",".join(expect["includes_any"]))
    if "also_any" in expect and not any(t in recommended for t in expect["also_any"]):
        why.append("second intent: none of " + ",".join(expect["also_any"]))
    if "excludes" in expect and any(t in recommended for t in expect["excludes"]):
        why.append("recommends excluded " + ",".join(t for t in expect["excludes"] if t in recommended))
    if expect.get("empty") and recommended:
        why.append("expected no tools")
    if expect.get("no_write") and any(t.split("_")[0] in WRITE_WORDS for t in recommended):
        why.append("recommends a write")
    if "domains_include" in expect and not set(expect["domains_include"]) <= domains:
        why.append("domains lack " + ",".join(expect["domains_include"]))
    if "domains_any" in expect and not set(expect["domains_any"]) & domains:
        why.append("domains lack any of " + ",".join(expect["domains_any"]))
    if "action" in expect and str(action).lower() != expect["action"]:
        why.append(f"action {action} != {expect['action']}")
    return why


def expects_write(expect: dict) -> bool:
    """Whether a routing case wants a write tool (a read case and a no-tool case do not)."""
    wanted = list(expect.get("includes", ())) + list(expect.get("includes_any", ()))
    return any(name.split("_")[0] in WRITE_WORDS for name in wanted)


def case_category(expect: dict) -> str:
    """A routing case's category, read from what it expects (for per-category figures)."""
    wanted = set(expect.get("includes", ())) | set(expect.get("includes_any", ()))
    if "also_any" in expect:
        return "multi-intent"
    if expect.get("empty"):
        return "general knowledge"
    if "excludes" in expect and not wanted:
        return "never exposed"
    if "create_rule_draft" in wanted:
        return "rule creation"
    if wanted == {settings.TOOLHUB_CALCULATOR_TOOL}:
        return "arithmetic"
    if wanted & set(settings.TOOLHUB_CLOCK_TOOLS):
        return "date and time"
    if wanted == {settings.TOOLHUB_WEB_SEARCH_TOOL}:
        return "real-time"
    if expect.get("no_write") and not wanted:
        return "vague"
    if "domains_any" in expect:
        return "loyalty read" if expect.get("no_write") else "loyalty write"
    return "infrastructure"
