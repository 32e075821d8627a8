"""The machine's file of vectors (catalog/search/embedding_cache.py): read before the model runs, written once, per
model."""

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from catalog.search import embedding_cache, embeddings


@pytest.fixture
def fake_models(monkeypatch):
    """Both forward passes replaced by a deterministic stand-in that records what it was asked to embed."""
    forwarded = []

    def forward(model):
        def run(texts):
            forwarded.append((model, list(texts)))
            seeds = [abs(hash((model, text))) % 2**32 for text in texts]
            rows = np.array([np.random.default_rng(seed).standard_normal(8) for seed in seeds], dtype=np.float32)
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

        return run

    monkeypatch.setattr(embeddings, "_forward_e5", forward(embeddings.E5_SMALL))
    monkeypatch.setattr(embeddings, "_forward_minilm", forward(embeddings.MINILM))
    embeddings.forget_memo()
    yield forwarded
    embeddings.forget_memo()


def test_a_text_embedded_once_is_read_from_the_file_by_a_process_remembering_nothing(fake_models, settings, tmp_path):
    settings.TOOLHUB_VECTOR_CACHE = str(tmp_path / "vectors.sqlite3")
    first = embeddings.embed_texts(["đổi điểm", "weather in Hanoi"], model=embeddings.E5_SMALL)
    embeddings.forget_memo()  # as a new process
    again = embeddings.embed_texts(["weather in Hanoi", "đổi điểm", "a new text"], model=embeddings.E5_SMALL)

    assert fake_models == [
        (embeddings.E5_SMALL, ["đổi điểm", "weather in Hanoi"]),
        (embeddings.E5_SMALL, ["a new text"]),
    ]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[1], first[0])


def test_each_model_reads_only_its_own_vectors(fake_models, settings, tmp_path):
    settings.TOOLHUB_VECTOR_CACHE = str(tmp_path / "vectors.sqlite3")
    embeddings.embed_texts(["points balance"], model=embeddings.E5_SMALL)
    embeddings.forget_memo()
    embeddings.embed_texts(["points balance"], model=embeddings.MINILM)

    assert [model for model, _ in fake_models] == [embeddings.E5_SMALL, embeddings.MINILM]


def test_without_the_setting_no_file_is_read_or_written(fake_models, settings, tmp_path):
    settings.TOOLHUB_VECTOR_CACHE = ""
    embeddings.embed_texts(["points balance"], model=embeddings.E5_SMALL)
    embeddings.forget_memo()
    embeddings.embed_texts(["points balance"], model=embeddings.E5_SMALL)

    assert len(fake_models) == 2 and list(tmp_path.iterdir()) == []


def test_inside_off_the_model_runs_even_for_a_cached_text(fake_models, settings, tmp_path):
    settings.TOOLHUB_VECTOR_CACHE = str(tmp_path / "vectors.sqlite3")
    embeddings.embed_texts(["points balance"], model=embeddings.E5_SMALL)
    embeddings.forget_memo()
    with embedding_cache.off():
        embeddings.embed_texts(["points balance"], model=embeddings.E5_SMALL)

    assert len(fake_models) == 2


def _write_from_another_process(file: str, texts: list[str]) -> None:
    vectors = {text: np.full(4, float(len(text)), dtype=np.float32) for text in texts}
    for _ in range(20):
        embedding_cache._write_to(file, "model", vectors)


def test_processes_writing_the_same_texts_at_once_keep_one_row_each(tmp_path):
    file = str(tmp_path / "vectors.sqlite3")
    texts = [f"text {i}" for i in range(300)]
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_from_another_process, args=(file, texts)) for _ in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
    assert [writer.exitcode for writer in writers] == [0, 0, 0]

    found = embedding_cache._read_from(file, "model", texts + ["never written"])
    assert set(found) == set(texts)
    assert all(np.array_equal(found[text], np.full(4, float(len(text)))) for text in texts)


def _embed_in_another_process(file: str, texts: list[str], log: str) -> None:
    from django.conf import settings

    settings.TOOLHUB_VECTOR_CACHE = file

    def forward(batch):
        with open(log, "a") as out:
            out.writelines(f"{text}\n" for text in batch)
        time.sleep(0.02)  # a forward pass takes time: the other process reaches the batches this one holds
        return np.array([np.full(4, float(len(text))) for text in batch], dtype=np.float32)

    vectors = embedding_cache.embed("model", texts, forward)
    assert set(vectors) == set(texts)
    assert all(np.array_equal(vectors[text], np.full(4, float(len(text)))) for text in texts)


def test_processes_needing_the_same_new_texts_at_once_embed_each_of_them_once(tmp_path):
    """The test suite's two workers building the demo on a fresh clone: the work is split, not done twice."""
    file, log = str(tmp_path / "vectors.sqlite3"), str(tmp_path / "forwarded.txt")
    texts = [f"example {i} " + "x" * (i % 7) for i in range(40 * embedding_cache.SHARE)]
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_embed_in_another_process, args=(file, texts, log)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)

    assert [worker.exitcode for worker in workers] == [0, 0]  # each got every vector (asserted in the process)
    forwarded = Path(log).read_text().splitlines()
    assert sorted(forwarded) == sorted(texts)  # each text once, by one of them
    assert set(embedding_cache._read_from(file, "model", texts)) == set(texts)


def test_a_process_opening_the_file_while_another_writes_it_waits_for_it(settings, tmp_path):
    """The race the suite's two workers ran into on a fresh clone: one switched the new file to WAL while the other
    wrote it, and SQLite refused at once ("database is locked"), not after its busy timeout."""
    settings.TOOLHUB_VECTOR_CACHE = file = str(tmp_path / "vectors.sqlite3")
    other = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE early (x)")
    other.execute("BEGIN IMMEDIATE")  # another process's write, before the file is in WAL mode
    other.execute("INSERT INTO early VALUES (1)")
    ends = threading.Timer(0.3, other.execute, ["COMMIT"])
    ends.start()
    try:
        assert embedding_cache.read("model", ["not there yet"]) == {}
    finally:
        ends.join()
        other.close()
    assert sqlite3.connect(file).execute("PRAGMA journal_mode").fetchone() == ("wal",)
