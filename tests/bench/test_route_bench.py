"""route_bench: the scaled catalog is deterministic and well formed; a tiny run prints its figures as JSON."""

import json
from io import StringIO

from django.core.management import call_command

from bench.evaluation import scaled_catalog
from catalog.search import embeddings
from tests.catalog.search.test_search import bag_of_words_embedder

PUBLIC = [
    {
        "name": f"tool_{n}",
        "description": f"Do thing number {n} with the weather, stocks and email.",
        "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}},
    }
    for n in range(6)
]


def test_scaled_catalog_tops_up_with_seeded_distractors_of_the_same_shape():
    catalog = scaled_catalog(PUBLIC, 40, seed=3)
    assert len(catalog) == 40 and catalog[:6] == PUBLIC
    assert len({tool["name"] for tool in catalog}) == 40
    assert all(set(tool) >= {"name", "description", "parameters"} for tool in catalog)
    assert scaled_catalog(PUBLIC, 40, seed=3) == catalog
    assert scaled_catalog(PUBLIC, 40, seed=4) != catalog


def test_scaled_catalog_smaller_than_the_public_one_is_a_sample():
    sample = scaled_catalog(PUBLIC, 3, seed=1)
    assert len(sample) == 3 and all(tool in PUBLIC for tool in sample)


def test_route_bench_prints_step_timings_and_memory_as_json(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    monkeypatch.setattr(embeddings, "load_model", lambda model=None: None)
    (tmp_path / "catalog.json").write_text(json.dumps(PUBLIC))
    queries = [{"id": str(n), "query": f"weather {n}", "expected_tools": [f"tool_{n}"]} for n in range(6)]
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    out = StringIO()
    call_command("route_bench", "--tools", "25", "--bench-dir", str(tmp_path), "--requests", "4", stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["n_tools"] == 25 and report["n_distractors"] == 19 and report["n_requests"] == 4
    assert report["allowed_size"] == 25 and set(report["steps"]) == {"steward", "bundle"}
    assert report["p95_ms"] >= report["p50_ms"] > 0 and report["peak_rss_mb"] > 0


def test_route_bench_with_history_times_the_warm_index(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "embed_texts", bag_of_words_embedder)
    monkeypatch.setattr(embeddings, "load_model", lambda model=None: None)
    (tmp_path / "catalog.json").write_text(json.dumps(PUBLIC))
    queries = [{"id": str(n), "query": f"weather {n}", "expected_tools": [f"tool_{n}"]} for n in range(6)]
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    out = StringIO()
    args = ["--tools", "25", "--bench-dir", str(tmp_path), "--requests", "4", "--history", str(tmp_path / "dev.jsonl")]
    call_command("route_bench", *args, stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["n_examples"] == 6 and report["n_requests"] == 4
    assert set(report["examples_ab"]) == {"steward_cold", "steward_warm"}
