"""all-MiniLM-L6-v2 on numpy (catalog/search/minilm.py) gives the model's own vectors.

tests/data/minilm_reference.npz holds texts and the vectors the reference implementation gave them (transformers'
BertModel on torch, each text alone, mean-pooled and normalised: what tool search ran before), recorded once:
short and long (truncated at 256 tokens), empty, accented, Vietnamese, emoji.
"""

from pathlib import Path

import numpy as np
import pytest
from scipy.special import erf

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


def test_the_gelu_is_the_exact_one_over_every_input_and_across_its_passes():
    # Past +-4 sqrt 2 erf is +-1 in float32; more values than one pass takes, and not a multiple of it.
    values = np.concatenate([np.linspace(-12, 12, 40_001), [0.0, -0.0, 1e-8, -1e-8, 3e4, -3e4]]).astype(np.float32)
    values = np.tile(values, 2)[: minilm._GELU_CHUNK * 2 + 77]
    exact = values.astype(np.float64) * 0.5 * (1.0 + erf(values.astype(np.float64) / np.sqrt(2.0)))
    computed = values.reshape(-1, 1).copy()  # a 2-D array, as the encoder passes it

    minilm._gelu(computed)

    assert computed.dtype == np.float32
    # float32 rounding of x itself is 6e-8 x; the approximation of erf adds at most 4.5e-7 x / 2.
    assert (np.abs(computed.ravel() - exact) <= 5e-7 * np.maximum(1.0, np.abs(values))).all()
