"""A file of vectors the embedding models already made, shared by every process on one machine.

Off unless TOOLHUB_VECTOR_CACHE names a file (SQLite, stdlib only). The test suite
turns it on (Makefile, tests/conftest.py): its two workers, the servers and Celery
workers its integration tests start, and the next run read each other's vectors
instead of embedding the demo's ~3,000 example texts again per process (about a
minute of CPU each). A deployment shares vectors through the database instead
(catalog.vectors, TextEmbedding); this file is a local memo of model outputs, keyed
like TextEmbedding by the model's full name and the text, so a vector made by
another model is never read.

Every process opens its own connection (WAL, so readers never wait for a writer);
a vector is written once (INSERT OR IGNORE): two processes racing to write the same
text write the same bytes. A file that cannot be opened or written is an error, not
a silent fallback: the setting asked for it.
"""

import hashlib
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from django.conf import settings

CHUNK = 500  # keys per query (SQLite's variable limit)
_local = threading.local()
_off = 0  # > 0 inside off(): benchmarks time the model, not this file


def path() -> str:
    return "" if _off else getattr(settings, "TOOLHUB_VECTOR_CACHE", "") or ""


@contextmanager
def off():
    """Neither read nor write the file inside (benchmarks: a timed embedding pays for the model)."""
    global _off
    _off += 1
    try:
        yield
    finally:
        _off -= 1


def cache_key(model_name: str, text: str) -> str:
    return hashlib.sha256(f"{model_name}\n{text}".encode()).hexdigest()


def _connection(file: str) -> sqlite3.Connection:
    connections = getattr(_local, "connections", None)
    if connections is None:
        connections = _local.connections = {}
    key = (os.getpid(), file)
    if key not in connections:
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(file, timeout=60, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE IF NOT EXISTS vector (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
        connections[key] = connection
    return connections[key]


def read(model_name: str, texts: list[str]) -> dict[str, np.ndarray]:
    """The cached vectors of those `texts` that have one, by text (empty when the cache is off)."""
    file = path()
    return _read_from(file, model_name, texts) if file and texts else {}


def write(model_name: str, vectors: dict[str, np.ndarray]) -> None:
    """Keep `vectors` (by text) for every later process; a no-op when the cache is off."""
    file = path()
    if file and vectors:
        _write_to(file, model_name, vectors)


def _read_from(file: str, model_name: str, texts: list[str]) -> dict[str, np.ndarray]:
    keys = {cache_key(model_name, text): text for text in texts}
    wanted = list(keys)
    found = {}
    connection = _connection(file)
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        for key, data in connection.execute(f"SELECT key, data FROM vector WHERE key IN ({marks})", chunk):
            found[keys[key]] = np.frombuffer(data, dtype="<f4").copy()
    return found


def _write_to(file: str, model_name: str, vectors: dict[str, np.ndarray]) -> None:
    rows = [(cache_key(model_name, text), np.asarray(v, dtype="<f4").tobytes()) for text, v in vectors.items()]
    connection = _connection(file)
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany("INSERT OR IGNORE INTO vector (key, data) VALUES (?, ?)", rows)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
