"""Rank one catalog by two of its indexes at once: the router's candidate tools by both embedding models.

The router reads requests with the routing model (multilingual e5: English and Vietnamese) and tool search ranks
with the search model (MiniLM: English only, and the better ranker of English requests: on the shared dev set the
live path scored recall@5 0.552 ranked by e5 alone, 0.607 by MiniLM alone). `rank_both` scores each tool by
the weighted mean of its hybrid score (cosine + BM25 share + examples' boost) in both indexes. MiniLM's scores
spread about seven times wider than e5's (top against fifth: 0.08 against 0.012 on the demo catalog), so even at
equal weights MiniLM orders what e5 finds close. The router takes its decision (action, domains, confidence) from
the routing model's ranking alone and only its candidates' order from this one (agents/router/rules.py): Vietnamese
requests, which MiniLM cannot read, lost two routing cases when both models voted. The weight
(TOOLHUB_ROUTING_SEARCH_WEIGHT) was chosen on dev data (docs/benchmarks/index.md). Pure logic over two
ToolSearchIndex values.
"""

from collections.abc import Collection

import numpy as np

from .index import SearchResult, ToolSearchIndex, words


def rank_both(
    query: str,
    first: ToolSearchIndex,
    second: ToolSearchIndex | None,
    *,
    weight: float,
    limit: int,
    owner_id: int | None = None,
    exclude_examples: Collection[str] = (),
    example_weight: float,
    vector: np.ndarray | None = None,
    second_vector: np.ndarray | None = None,
) -> tuple[SearchResult, SearchResult]:
    """(the first index's ranking, the ranking by (first + weight x second) / (1 + weight)): the best `limit` tools
    of the whole catalog each way, each index scored once (natural-language queries only).

    `vector`, `second_vector`: the query's vector by each index's model, when the caller has it. With no second
    index, a weight of 0, either index without its dense model, two indexes of different tools or no tools, both
    rankings are the first index's search.
    """
    if (
        second is None
        or weight <= 0
        or not (first.dense and second.dense)
        or second.names != first.names
        or not first.names  # an empty catalog: the search says so
        or not words(query)
    ):
        found = first.search(
            query,
            allowed=None,
            limit=limit,
            owner_id=owner_id,
            exclude_examples=exclude_examples,
            example_weight=example_weight,
            vector=vector,
        )
        return found, found
    scores, hits = first.scores(
        query, owner_id=owner_id, exclude=exclude_examples, weight=example_weight, vector=vector
    )
    second_scores, second_hits = second.scores(
        query, owner_id=owner_id, exclude=exclude_examples, weight=example_weight, vector=second_vector
    )
    # A weighted mean: scores stay in the range the router's margins and example bonus were set for.
    both = (scores + weight * second_scores) / (1.0 + weight)
    return first.best(scores, np.flatnonzero(hits), limit), first.best(both, np.flatnonzero(hits | second_hits), limit)
