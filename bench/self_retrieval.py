"""Self-retrieval: could a catalog choose its own dense/BM25 fusion weight, with no queries and no labels?

From a seeded sample of a catalog's tools it makes pseudo-queries (GENERATORS) and scores, for each weight w of a
grid, how well the linear fusion the index uses (cosine + w x BM25 / the query's peak BM25) finds each pseudo-query's
own tool: recall@5 and MRR. `fusion_study --self-retrieval` prints the weight each generator would choose beside the
weight the set's real queries want. Measured 2026-12-07 (bench/results/fusion-2026-12-07-weight-per-catalog.json,
docs/benchmarks/index.md): the chosen weight does not follow the wanted one, so catalog.search does not use this.
Benchmark code: it never runs in a request and never writes.
"""

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from catalog.search.index import (
    ToolDocument,
    ToolSearchIndex,
    dense_text,
    lexical_tokens,
    name_words,
    query_tokens,
    words,
)

# bm25s's defaults (method "lucene"), which ToolSearchIndex's BM25 uses: a held-out document is scored alike.
BM25_K1 = 1.5
BM25_B = 0.75
SAMPLE = 200
QUERY_WORDS = 16
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class PseudoQuery:
    """A query made from tool `tool` (its position); `held_out` is the tool's document without the query's part,
    scored in place of the indexed one (None: the indexed document, query words and all)."""

    tool: int
    text: str
    held_out: ToolDocument | None = None


def _without_name_words(text: str, document: ToolDocument) -> str:
    name = set(words(name_words(document.name)))
    return " ".join(w for w in words(text) if w not in name)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if words(s)]


def first_sentence(document: ToolDocument, rng: random.Random) -> PseudoQuery | None:
    """The description's first sentence, the name's words removed; the tool keeps its whole document."""
    sentences = _sentences(document.description)
    text = " ".join(_without_name_words(sentences[0], document).split()[:QUERY_WORDS]) if sentences else ""
    return PseudoQuery(-1, text)


def half_the_words(document: ToolDocument, rng: random.Random) -> PseudoQuery | None:
    """A seeded half of the description's words (no name words), like a request that says part of it in its order."""
    kept = [w for w in _without_name_words(document.description, document).split() if rng.random() < 0.5]
    return PseudoQuery(-1, " ".join(kept[:QUERY_WORDS]))


def parameter_descriptions(document: ToolDocument, rng: random.Random) -> PseudoQuery | None:
    """What the schema says of the tool's fields, no name words: a request names the values it brings."""
    said = " ".join(description for _, description, _ in document.parameters)
    return PseudoQuery(-1, " ".join(_without_name_words(said, document).split()[:QUERY_WORDS]))


def held_out_part(document: ToolDocument, rng: random.Random) -> PseudoQuery | None:
    """The first sentence (or, with one sentence, a seeded half of its words) as the query, and the tool scored on
    its document without it: the query is not copied from what it is matched against (which may share words)."""
    sentences = _sentences(document.description)
    if len(sentences) >= 2:
        part, rest = sentences[0], " ".join(sentences[1:])
    else:
        tokens = document.description.split()
        if len(tokens) < 4:
            return None
        chosen = [rng.random() < 0.5 for _ in tokens]
        part = " ".join(t for t, c in zip(tokens, chosen, strict=True) if c)
        rest = " ".join(t for t, c in zip(tokens, chosen, strict=True) if not c)
    return PseudoQuery(-1, _without_name_words(part, document), held_out=replace(document, description=rest))


GENERATORS: dict[str, Callable[[ToolDocument, random.Random], PseudoQuery | None]] = {
    "first_sentence": first_sentence,
    "half_the_words": half_the_words,
    "parameter_descriptions": parameter_descriptions,
    "held_out_part": held_out_part,
}


def pseudo_queries(
    documents: Sequence[ToolDocument], generator: str, *, sample: int = SAMPLE, seed: int = 0
) -> list[PseudoQuery]:
    """One pseudo-query per sampled tool that yields one with a word to search for (seeded, so repeatable)."""
    make = GENERATORS[generator]
    positions = random.Random(seed).sample(range(len(documents)), min(sample, len(documents)))
    rng = random.Random(seed + 1)
    found = []
    for position in positions:
        query = make(documents[position], rng)
        if query is not None and words(query.text):
            found.append(replace(query, tool=position))
    return found


class HeldOutBM25:
    """BM25 of a query against a document that is not in the index, with the index's corpus statistics."""

    def __init__(self, documents: Sequence[ToolDocument]):
        corpus = [lexical_tokens(d) for d in documents]
        frequency = Counter(token for tokens in corpus for token in set(tokens))
        total = len(corpus)
        self.average_length = sum(map(len, corpus)) / max(1, total)
        self.idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}

    def score(self, query: str, document: ToolDocument) -> float:
        tokens = lexical_tokens(document)
        counts, length = Counter(tokens), len(tokens)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / self.average_length)
        return sum(self.idf.get(t, 0.0) * counts[t] / (counts[t] + norm) for t in query_tokens(query) if counts[t])


def self_retrieval(
    documents: Sequence[ToolDocument],
    *,
    lexical_index: ToolSearchIndex,
    tool_vectors: np.ndarray,
    embed: Callable[[list[str]], np.ndarray],
    generator: str,
    weights: Sequence[float],
    sample: int = SAMPLE,
    seed: int = 0,
) -> dict:
    """{"queries": n, "by_weight": {w: {"recall@5", "mrr"}}, "chosen": the w with the best recall@5 (then MRR)}.

    `lexical_index`: the documents indexed (BM25 only is enough); `tool_vectors`: their dense vectors, in order.
    """
    queries = pseudo_queries(documents, generator, sample=sample, seed=seed)
    if not queries:
        return {"queries": 0, "by_weight": {}, "chosen": None}
    rows = np.arange(len(queries))
    own = np.array([q.tool for q in queries])
    query_vectors = embed([q.text for q in queries])
    cosines = query_vectors @ tool_vectors.T
    lexical = np.vstack([lexical_index.scores(q.text, use=False)[0] for q in queries]).astype(np.float32)
    held_out = [(i, q) for i, q in enumerate(queries) if q.held_out is not None]
    if held_out:
        scorer = HeldOutBM25(documents)
        reduced = embed([dense_text(q.held_out) for _, q in held_out])
        for (i, query), vector in zip(held_out, reduced, strict=True):
            cosines[i, query.tool] = float(query_vectors[i] @ vector)
            lexical[i, query.tool] = scorer.score(query.text, query.held_out)
    peak = lexical.max(axis=1, keepdims=True)
    normalised = np.divide(lexical, peak, out=np.zeros_like(lexical), where=peak > 0)
    positions = np.arange(len(documents))[None, :]
    by_weight = {}
    for weight in weights:
        fused = cosines + weight * normalised
        # Tools above the own one; a tie goes to the earlier position, as the index breaks ties.
        mine = fused[rows, own][:, None]
        ranks = ((fused > mine) | ((fused == mine) & (positions < own[:, None]))).sum(axis=1)
        by_weight[weight] = {
            "recall@5": round(float((ranks < 5).mean()), 4),
            "mrr": round(float((1.0 / (1 + ranks)).mean()), 4),
        }
    chosen = max(weights, key=lambda w: (by_weight[w]["recall@5"], by_weight[w]["mrr"]))
    return {"queries": len(queries), "by_weight": by_weight, "chosen": chosen}


def catalog_statistics(documents: Sequence[ToolDocument], tool_vectors: np.ndarray) -> dict:
    """What a catalog looks like, for comparing catalogs: its size, words per description, BM25 tokens per tool,
    distinct tokens per tool, and the mean cosine of a tool to its nearest other tool (how crowded it is)."""
    tokens = [lexical_tokens(d) for d in documents]
    nearest = []
    for start in range(0, len(documents), 1000):  # in blocks: a 10,000-tool square would be 400 MB
        block = tool_vectors[start : start + 1000] @ tool_vectors.T
        block[np.arange(block.shape[0]), np.arange(start, start + block.shape[0])] = -1.0
        nearest.append(block.max(axis=1))
    return {
        "tools": len(documents),
        "description_words": round(float(np.mean([len(words(d.description)) for d in documents])), 1),
        "bm25_tokens": round(float(np.mean([len(t) for t in tokens])), 1),
        "distinct_tokens_per_tool": round(len({t for ts in tokens for t in ts}) / max(1, len(documents)), 2),
        "nearest_tool_cosine": round(float(np.concatenate(nearest).mean()), 3) if nearest else 0.0,
    }
