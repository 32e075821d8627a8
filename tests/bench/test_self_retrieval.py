"""bench.self_retrieval: pseudo-queries from a catalog's own tools, and the fusion weight they choose."""

import hashlib
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from bench.self_retrieval import GENERATORS, HeldOutBM25, catalog_statistics, pseudo_queries, self_retrieval
from catalog.search import embeddings
from catalog.search.index import ToolDocument, ToolSearchIndex, dense_text, words
from tests.catalog.search.test_search import bag_of_words_embedder

WEIGHTS = (0.0, 0.05, 0.5, 1.5)
TOPICS = (
    "weather forecast rain", "stock ticker price", "email recipient message", "docker container restart",
    "invoice customer amount", "translate language text", "calendar meeting invite", "parcel shipment tracking",
    "flight airport booking", "recipe ingredient cooking", "playlist song music", "hotel room reservation",
    "bank account balance", "vaccine clinic appointment", "library book loan", "traffic road congestion",
    "currency exchange rate", "football match score", "earthquake magnitude report", "domain dns record",
)  # fmt: skip


def catalog_documents() -> list[ToolDocument]:
    """One tool per topic: a first sentence of its own words, then a second sentence every tool shares."""
    return [
        ToolDocument(f"tool_{i}", f"Looks after {topic}. Returns a result for the request.")
        for i, topic in enumerate(TOPICS)
    ]


def noise_embedder(texts):
    """A dense model that understands nothing: each text a fixed pseudo-random unit vector."""
    rows = np.vstack(
        [np.random.default_rng(int(hashlib.md5(t.encode()).hexdigest()[:8], 16)).normal(size=32) for t in texts]
    )
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def oracle_embedder(documents):
    """A dense model that understands: a query made from a tool's first sentence points at that tool (cosine 0.8)
    and a little less at the one before (0.75); a tool's own text at itself alone."""

    def embed(texts):
        rows = np.zeros((len(texts), len(documents)), dtype=np.float32)
        for row, text in enumerate(texts):
            for column, document in enumerate(documents):
                if text == dense_text(document):
                    rows[row, column] = 1.0
                elif set(words(text)) <= set(words(document.description.split(".")[0])):
                    rows[row, column], rows[row, column - 1] = 0.8, 0.75
                else:
                    continue
                break
        return rows

    return embed


def choose(documents, embed, weights=WEIGHTS, generator="first_sentence"):
    return self_retrieval(
        documents,
        lexical_index=ToolSearchIndex(documents),
        tool_vectors=embed([dense_text(d) for d in documents]),
        embed=embed,
        generator=generator,
        weights=weights,
        sample=len(documents),
    )


def test_pseudo_queries_leave_out_the_tools_name_words_and_are_repeatable():
    documents = [ToolDocument("weather_forecast", "Weather forecast for a city. Also rain.")]
    first = pseudo_queries(documents, "first_sentence")
    assert [(q.tool, q.text) for q in first] == [(0, "for a city")]
    assert pseudo_queries(documents, "half_the_words", seed=3) == pseudo_queries(documents, "half_the_words", seed=3)


def test_a_held_out_query_is_scored_against_its_tool_without_the_query_part():
    (query,) = pseudo_queries([ToolDocument("t", "Books hotel rooms. Cancels bookings too.")], "held_out_part")
    assert query.text == "books hotel rooms"
    assert query.held_out.description == "Cancels bookings too."


def test_held_out_bm25_scores_an_indexed_document_as_the_index_does():
    documents = catalog_documents()
    index = ToolSearchIndex(documents)
    expected = index.scores("stock price for a ticker")[0]
    scorer = HeldOutBM25(documents)
    assert [scorer.score("stock price for a ticker", d) for d in documents] == pytest.approx(expected.tolist(), 1e-5)


def test_self_retrieval_chooses_a_high_bm25_weight_when_only_words_tell_tools_apart():
    result = choose(catalog_documents(), noise_embedder)
    assert result["queries"] == len(TOPICS)
    assert result["by_weight"][1.5]["recall@5"] == 1.0
    assert result["by_weight"][0.0]["mrr"] < 0.5
    assert result["chosen"] == 1.5


def test_self_retrieval_chooses_no_bm25_weight_when_the_dense_model_already_finds_every_tool():
    # Each tool's schema repeats the next topic's words, so BM25 ranks that tool above the topic's own.
    documents = [
        ToolDocument(d.name, d.description, parameters=(("note", " ".join([TOPICS[(i + 1) % len(TOPICS)]] * 3), ()),))
        for i, d in enumerate(catalog_documents())
    ]
    result = choose(documents, oracle_embedder(documents), weights=(1.5, 0.5, 0.0))
    assert result["by_weight"][0.0]["mrr"] == 1.0
    assert result["by_weight"][1.5]["mrr"] < 1.0
    assert result["chosen"] == 0.0


def test_catalog_statistics_describe_size_words_and_crowding():
    documents = catalog_documents()
    figures = catalog_statistics(documents, noise_embedder([dense_text(d) for d in documents]))
    assert figures["tools"] == len(TOPICS)
    assert figures["description_words"] == pytest.approx(np.mean([len(words(d.description)) for d in documents]), 0.01)
    assert -1.0 < figures["nearest_tool_cosine"] < 1.0


def test_fusion_study_self_retrieval_reports_each_generators_weight_beside_the_real_one(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps([{"name": d.name, "description": d.description} for d in catalog_documents()]))
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"id": "1", "query": "will it rain tomorrow", "expected_tools": ["tool_0"]})
        + "\n"
        + json.dumps({"id": "2", "query": "restart my docker container", "expected_tools": ["tool_3"]})
        + "\n"
    )
    out, printed = tmp_path / "study.json", StringIO()
    call_command(
        "fusion_study", "--models", embeddings.MINILM, "--self-retrieval", "--set", "tiny", str(catalog), str(queries),
        "--out", str(out), stdout=printed,
    )  # fmt: skip
    figures = json.loads(out.read_text())["sets"]["tiny"]["models"][embeddings.MINILM]
    assert set(figures["self_retrieval"]) == set(GENERATORS)
    assert figures["self_retrieval"]["first_sentence"]["queries"] == len(TOPICS)
    assert figures["catalog"]["tools"] == len(TOPICS)
    assert "rrf k=5" in figures["fusions"]
    assert "real queries want w=" in printed.getvalue()
    assert "self-retrieval first_sentence" in printed.getvalue()
