"""route_eval: the metrics on hand-made rankings, errors naming the bad line, a tiny end-to-end run."""

import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from bench.evaluation import (
    BenchQuery,
    FullTextBM25,
    completeness_at_k,
    lenient_recall_at_k,
    load_catalog,
    load_queries,
    name_substring_ranking,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
    split_by_id,
    summarize,
    tool_documents,
)
from catalog.search import embeddings
from tests.catalog.search.test_search import bag_of_words_embedder


def test_recall_at_k_counts_the_share_of_expected_tools_in_the_top_k():
    ranked = ["a", "b", "c", "d"]
    assert recall_at_k(ranked, {"a"}, 1) == 1.0
    assert recall_at_k(ranked, {"c"}, 2) == 0.0
    assert recall_at_k(ranked, {"b", "d", "z"}, 4) == pytest.approx(2 / 3)


def test_lenient_recall_counts_a_copy_with_the_same_original_name():
    originals = {"f": "f", "f__v2": "f", "g": "g"}
    assert recall_at_k(["f__v2", "g"], {"f"}, 1) == 0.0
    assert lenient_recall_at_k(["f__v2", "g"], {"f"}, 1, originals) == 1.0
    assert lenient_recall_at_k(["g"], {"f"}, 1, originals) == 0.0


def test_reciprocal_rank_is_one_over_the_first_hit():
    assert reciprocal_rank(["x", "y", "a"], {"a", "y"}) == 0.5
    assert reciprocal_rank(["x"], {"a"}) == 0.0


def test_summarize_averages_over_queries_and_splits_by_source():
    queries = [BenchQuery("1", "q", ("a",), "one"), BenchQuery("2", "q", ("b", "c"), "two")]
    rankings = [["a", "x"], ["x", "b"] + ["y"] * 8 + ["c"]]
    figures = summarize(rankings, queries, {}, k=5)
    assert figures["recall@1"] == 0.5
    assert figures["recall@5"] == pytest.approx((1 + 0.5) / 2)
    assert figures["recall@10"] == pytest.approx((1 + 0.5) / 2)
    assert figures["mrr"] == pytest.approx((1 + 0.5) / 2)
    assert figures["per_source"] == {
        "one": {"n": 1, "recall@5": 1.0, "lenient_recall@5": 1.0},
        "two": {"n": 1, "recall@5": 0.5, "lenient_recall@5": 0.5},
    }


def test_ndcg_and_completeness_reward_every_expected_tool_near_the_top():
    assert ndcg_at_k(["a", "b", "x"], {"a", "b"}, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "a"], {"a"}, 10) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_k(["x"] * 10 + ["a"], {"a"}, 10) == 0.0
    assert completeness_at_k(["a", "x", "b"], {"a", "b"}, 3) == 1.0
    assert completeness_at_k(["a", "x", "b"], {"a", "b"}, 2) == 0.0
    queries = [BenchQuery("1", "q", ("a", "b", "c"), "s"), BenchQuery("2", "q", ("a",), "s")]
    figures = summarize([["a", "b", "c"], ["x"]], queries, {}, k=5)
    assert figures["completeness@10"] == 0.5
    assert figures["completeness@10_by_tools_needed"] == {
        "1": {"n": 1, "completeness@10": 0.0},
        "3+": {"n": 1, "completeness@10": 1.0},
    }


def test_the_full_text_bm25_baseline_reads_parameter_descriptions_and_enum_values():
    documents = tool_documents(
        [
            tool("geo_box", "Places in a box.", min_lon={"type": "number", "description": "bottom left longitude"}),
            tool("airport_info", "Airport details.", code={"type": "string", "enum": ["IATA", "ICAO"]}),
            tool("find_places", "Find places near a point."),
        ]
    )
    baseline = FullTextBM25(documents)
    assert baseline.rank("bottom left longitude of the box", 3)[0] == "geo_box"
    assert baseline.rank("look up by IATA", 3) == ["airport_info"]


def test_name_substring_baseline_matches_words_inside_names():
    names = ["get_weather", "weather_radar", "send_email"]
    assert name_substring_ranking("weather radar please", names, 5) == ["weather_radar", "get_weather"]
    assert name_substring_ranking("hi", names, 5) == []


def write_catalog(path, tools):
    path.write_text("[\n" + ",\n".join(json.dumps(tool) for tool in tools) + "\n]\n")
    return path


def tool(name, description, **parameters):
    return {"name": name, "description": description, "parameters": {"type": "object", "properties": parameters}}


@pytest.mark.parametrize(
    "body, line, message",
    [
        ('[\n{"name": "a", "description": "x"},\n{"name": "b"}\n]', 3, "description"),
        ('[\n{"name": "a", "description": "x"},\n{"name": "a", "description": "y"}\n]', 3, "twice"),
        ('[\n{"name": "a", "description": "x"},\n{"name": "b", "description": }\n]', 3, "not valid JSON"),
        ('{"name": "a"}', 1, "JSON list"),
    ],
)
def test_malformed_catalog_names_the_file_and_line(tmp_path, body, line, message):
    path = tmp_path / "catalog.json"
    path.write_text(body)
    with pytest.raises(ValueError, match=rf"catalog.json, line {line}: .*{message}"):
        load_catalog(path)


@pytest.mark.parametrize(
    "second_line, message",
    [
        ('{"id": "2", "query": "q", "expected_tools": ["a"]', "not valid JSON"),
        ('{"id": "2", "query": "", "expected_tools": ["a"]}', "'query'"),
        ('{"id": "2", "query": "q", "expected_tools": []}', "expected_tools"),
        ('{"id": "2", "query": "q", "expected_tools": ["zzz"]}', "not in the catalog: zzz"),
    ],
)
def test_malformed_queries_name_the_file_and_line(tmp_path, second_line, message):
    path = tmp_path / "queries.jsonl"
    path.write_text('{"id": "1", "query": "q", "expected_tools": ["a"]}\n' + second_line + "\n")
    with pytest.raises(ValueError, match=rf"queries.jsonl, line 2: .*{message}"):
        load_queries(path, known_tools={"a"})


@pytest.fixture
def bench_files(tmp_path):
    catalog = write_catalog(
        tmp_path / "catalog.json",
        [
            tool("get_weather", "Weather forecast for a city.", city={"type": "string"}),
            tool("send_email", "Send an email to someone.", to={"type": "string"}),
            tool("send_email__v2", "Email a message.", to={"type": "string"}) | {"original_name": "send_email"},
            tool("stock_price", "Latest price of a stock ticker."),
            tool("translate", "Translate text into another language."),
        ],
    )
    queries = tmp_path / "queries.jsonl"
    lines = [
        {"id": "1", "query": "what is the weather forecast in Paris", "expected_tools": ["get_weather"], "source": "x"},
        {"id": "2", "query": "send an email to Bob", "expected_tools": ["send_email"], "source": "y"},
        {"id": "3", "query": "convert this text into another language", "expected_tools": ["translate"], "source": "x"},
    ]
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return catalog, queries


def run_route_eval(*args) -> dict:
    from io import StringIO

    out = StringIO()
    call_command("route_eval", *args, stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_route_eval_end_to_end_with_baselines(bench_files, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    monkeypatch.setattr(embeddings, "load_model", lambda model=None: None)
    catalog, queries = bench_files
    report = run_route_eval("--catalog", str(catalog), "--queries", str(queries), "--compare")
    assert report["n_tools"] == 5 and report["n_queries"] == 3 and report["mode"] == "hybrid"
    assert report["recall@5"] == 1.0 and report["lenient_recall@5"] == 1.0
    assert set(report["per_source"]) == {"x", "y"}
    assert {"recall@1", "recall@3", "recall@10", "ndcg@10", "completeness@5", "completeness@10", "mrr"} <= set(report)
    assert {"p50_ms", "p95_ms", "index_build_s", "routing_model"} <= set(report)
    assert set(report["baselines"]) == {"bm25_full_text", "toolhub_search_alone", "dense_only", "name_substring"}
    # No tool name holds "convert", "text" or "language": the substring baseline misses query 3.
    assert report["baselines"]["name_substring"]["recall@5"] == pytest.approx(2 / 3, abs=1e-4)


def test_route_eval_keeps_only_the_queries_within_max_words(bench_files, settings):
    settings.TOOLHUB_SEARCH_EMBEDDINGS = False
    catalog, queries = bench_files
    report = run_route_eval("--catalog", str(catalog), "--queries", str(queries), "--max-words", "6")
    assert report["n_queries"] == 2  # "what is the weather forecast in Paris" has 7 words
    assert report["per_source"]["y"]["n"] == 1 and report["per_source"]["x"]["n"] == 1


def test_route_eval_with_dense_off_runs_bm25_and_skips_the_dense_baseline(bench_files, settings):
    settings.TOOLHUB_SEARCH_EMBEDDINGS = False
    catalog, queries = bench_files
    report = run_route_eval("--catalog", str(catalog), "--queries", str(queries), "--compare", "--format", "json")
    assert report["mode"] == "bm25" and report["model"] is None
    assert "dense_only" not in report["baselines"]


def test_route_eval_names_the_bad_line(tmp_path, bench_files):
    catalog, _ = bench_files
    queries = tmp_path / "bad.jsonl"
    queries.write_text('{"id": "1", "query": "weather", "expected_tools": ["get_weather"]}\nnot json\n')
    with pytest.raises(CommandError, match="bad.jsonl, line 2"):
        call_command("route_eval", "--catalog", str(catalog), "--queries", str(queries))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_route_eval_history_ranks_cold_and_warm_and_never_with_a_querys_own_example(bench_files, tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    monkeypatch.setattr(embeddings, "load_model", lambda model=None: None)
    catalog, _ = bench_files
    queries = write_jsonl(
        tmp_path / "eval.jsonl",
        [
            {"id": "a", "query": "ping my landlord about the rent", "expected_tools": ["send_email"], "source": "x"},
            {"id": "b", "query": "latest price of a stock ticker", "expected_tools": ["stock_price"], "source": "y"},
            {"id": "c", "query": "what is up with the weather in lisbon", "expected_tools": ["get_weather"]},
        ],
    )
    history = write_jsonl(
        tmp_path / "history.jsonl",
        [
            {"id": "h1", "query": "ping my landlord about the rent today", "expected_tools": ["send_email"]},
            # Same id as "b", same text as "c": both would pull the wrong tool first if they were used.
            {"id": "b", "query": "latest price of a stock ticker please", "expected_tools": ["translate"]},
            {"id": "h3", "query": "what is up with the weather in lisbon", "expected_tools": ["stock_price"]},
        ],
    )
    report = run_route_eval("--catalog", str(catalog), "--queries", str(queries), "--history", str(history))
    warm = report["history"]
    assert warm["n_history_queries"] == 3 and warm["n_examples"] == 3
    assert warm["skipped_self_matches"] == 2
    assert report["recall@1"] == pytest.approx(2 / 3, abs=1e-4), "cold: nothing matches the landlord query"
    assert warm["recall@1"] == 1.0
    assert set(warm["per_source"]) == {"x", "y", "unknown"}


def test_split_history_halves_the_queries_by_id_the_same_way_every_time(bench_files, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    monkeypatch.setattr(embeddings, "load_model", lambda model=None: None)
    queries = [BenchQuery(str(n), f"query {n}", ("a",), "s") for n in range(200)]
    history, evaluation = split_by_id(queries)
    assert sorted(history + evaluation, key=lambda q: int(q.id)) == queries
    assert 70 < len(history) < 130
    assert split_by_id(list(reversed(queries)))[0] == list(reversed(history))
    catalog, path = bench_files
    report = run_route_eval("--catalog", str(catalog), "--queries", str(path), "--split-history")
    first, second = split_by_id(load_queries(path))
    assert report["n_queries"] == len(second) and report["history"]["n_history_queries"] == len(first)


def test_route_eval_sample_ranks_the_same_seeded_subset_every_time(bench_files, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    monkeypatch.setattr(embeddings, "load_model", lambda model=None: None)
    catalog, queries = bench_files
    first = run_route_eval("--catalog", str(catalog), "--queries", str(queries), "--sample", "2", "--seed", "7")
    again = run_route_eval("--catalog", str(catalog), "--queries", str(queries), "--sample", "2", "--seed", "7")
    assert first["n_queries"] == 2
    assert first["per_source"] == again["per_source"]
