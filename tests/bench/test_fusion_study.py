"""fusion_study's weight chosen on a few labelled queries (--choose-from), on hand-made score matrices."""

import numpy as np

from bench.management.commands.fusion_study import WEIGHTS, weight_from_labelled
from catalog.search.index import BM25_WEIGHT

NAMES = [f"tool_{i}" for i in range(20)]


def matrices(lexical_right: bool):
    """40 queries, query q wants tool q % 20; the right tool tops BM25 (cosines mislead) or the cosines (BM25
    misleads)."""
    rng = np.random.default_rng(0)
    cosines = rng.uniform(0.2, 0.4, size=(40, 20)).astype(np.float32)
    lexical = rng.uniform(0.0, 2.0, size=(40, 20)).astype(np.float32)
    for query in range(40):
        right, wrong = query % 20, (query + 1) % 20
        if lexical_right:
            lexical[query, right], cosines[query, wrong] = 10.0, 0.5
        else:
            cosines[query, right], lexical[query, wrong] = 0.45, 10.0
    return cosines, lexical, [{NAMES[q % 20]} for q in range(40)]


def most_chosen(result: dict) -> float:
    return float(max(result["chosen"], key=result["chosen"].get))


def test_a_weight_chosen_on_labelled_queries_follows_what_they_want():
    cosines, lexical, expected = matrices(lexical_right=True)
    lexical_set = weight_from_labelled(cosines, lexical, NAMES, expected, sizes=[10])[10]
    cosines, lexical, expected = matrices(lexical_right=False)
    dense_set = weight_from_labelled(cosines, lexical, NAMES, expected, sizes=[10])[10]
    assert lexical_set["gain"] > 0.1 and most_chosen(lexical_set) > BM25_WEIGHT
    assert dense_set["gain"] >= 0 and {float(w) for w in dense_set["chosen"]} <= {
        w for w in WEIGHTS if w <= BM25_WEIGHT
    }


def test_sizes_outside_the_set_are_skipped():
    cosines, lexical, expected = matrices(True)
    assert set(weight_from_labelled(cosines, lexical, NAMES, expected, sizes=[0, 40, 5])) == {5}


def test_a_margin_keeps_the_shipped_weight_unless_another_beats_it_by_more():
    cosines, lexical, expected = matrices(lexical_right=True)
    kept = weight_from_labelled(cosines, lexical, NAMES, expected, sizes=[10], margin=1.0)[10]
    assert kept["chosen"] == {str(BM25_WEIGHT): 300} and kept["gain"] == 0.0
