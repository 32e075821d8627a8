"""all-MiniLM-L6-v2 on numpy (catalog/search/minilm.py) gives the model's own vectors.

tests/data/minilm_reference.npz holds texts and the vectors the reference implementation gave them (transformers'
BertModel on torch, each text alone, mean-pooled and normalised: what tool search ran before), recorded once:
short and long (truncated at 256 tokens), empty, accented, Vietnamese, emoji.
"""

from pathlib import Path

import numpy as np
import pytest

from catalog.search import embeddings

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
