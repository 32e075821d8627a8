"""The router's ranking by two indexes of one catalog (catalog.search.ensemble), on plain values."""

import numpy as np
import pytest

from catalog.search import service
from catalog.search.ensemble import rank_both
from catalog.search.index import ToolSearchIndex
from tests.catalog.search.test_search import CATALOG, DIM, bag_of_words_embedder


def flat_embedder(texts, *, model=None):
    """A model that reads nothing: every text gets the same vector, so every tool the same cosine."""
    rows = np.zeros((len(texts), DIM), dtype=np.float32)
    rows[:, 0] = 1.0
    return rows


@pytest.fixture
def blind():
    return ToolSearchIndex(CATALOG, embedder=flat_embedder, bm25_weight=0.0)


@pytest.fixture
def reader():
    return ToolSearchIndex(CATALOG, embedder=bag_of_words_embedder, bm25_weight=0.0)


def ranked(query, first, second, weight, limit=3):
    """The ranking by both indexes (rank_both's second)."""
    return rank_both(query, first, second, weight=weight, limit=limit, example_weight=0.3)[1]


def test_a_zero_weight_or_no_second_index_ranks_by_the_first_alone(blind, reader):
    alone = blind.search("restart the docker container", allowed=None, limit=3)
    assert ranked("restart the docker container", blind, reader, 0.0).names == alone.names
    assert ranked("restart the docker container", blind, None, 1.0).names == alone.names


def test_the_second_index_orders_what_the_first_cannot_tell_apart(blind, reader):
    assert blind.search("restart the docker container", allowed=None, limit=1).names != ["restart_container"]
    assert ranked("restart the docker container", blind, reader, 0.5).names[0] == "restart_container"


def test_the_fused_score_is_the_weighted_mean_of_both_scores(blind, reader):
    query = "send an email"
    first, _ = blind.scores(query, weight=0.3)
    second, _ = reader.scores(query, weight=0.3)
    found = ranked(query, blind, reader, 0.5, limit=len(CATALOG))
    position = {name: i for i, name in enumerate(blind.names)}
    for name, score in zip(found.names, found.scores, strict=True):
        expected = (first[position[name]] + 0.5 * second[position[name]]) / 1.5
        assert score == pytest.approx(expected, abs=1e-5)


def test_indexes_of_different_tools_rank_by_the_first_alone(reader):
    other = ToolSearchIndex(CATALOG[:-1], embedder=flat_embedder, bm25_weight=0.0)
    alone = reader.search("send an email", allowed=None, limit=3)
    assert ranked("send an email", reader, other, 1.0).names == alone.names


def test_rank_catalog_adds_the_second_model_with_its_weight(monkeypatch, blind, reader):
    indexes = {"routing": blind, "search": reader}
    monkeypatch.setattr(service, "catalog_index", lambda *, model=None: indexes[model])
    query = "restart the docker container"
    alone = service.rank_catalog(query, model="routing", limit=3, second_model="search", second_weight=0.0)
    routing, both = service.rank_catalog(query, model="routing", limit=3, second_model="search", second_weight=0.5)
    assert alone == (blind.search(query, allowed=None, limit=3),) * 2
    # The first ranking stays the routing model's (it decides the request); the second orders the candidates.
    assert routing == blind.search(query, allowed=None, limit=3)
    assert both.names[0] == "restart_container"


def test_both_rankings_come_from_one_scoring_of_each_index(monkeypatch, blind, reader):
    scored = []
    for index in (blind, reader):
        real = index.scores

        def counting(query, _real=real, _index=index, **kwargs):
            scored.append(_index)
            return _real(query, **kwargs)

        monkeypatch.setattr(index, "scores", counting)
    first, both = rank_both("restart the docker container", blind, reader, weight=0.5, limit=3, example_weight=0.3)
    assert scored == [blind, reader]
    assert first.names == blind.search("restart the docker container", allowed=None, limit=3).names
    assert both.names[0] == "restart_container"


def test_a_catalog_with_no_tools_ranks_nothing_by_either_model():
    empty = ToolSearchIndex([], embedder=bag_of_words_embedder, bm25_weight=0.0)
    other = ToolSearchIndex([], embedder=flat_embedder, bm25_weight=0.0)
    first, both = rank_both("restart the docker container", empty, other, weight=1.0, limit=3, example_weight=0.3,
                            second_vector=np.ones(DIM, dtype=np.float32))  # fmt: skip
    assert first.names == both.names == []
