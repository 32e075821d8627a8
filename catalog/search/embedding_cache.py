"""A file of vectors the embedding models already made, shared by every process on one machine.

Off unless TOOLHUB_VECTOR_CACHE names a file (SQLite, stdlib only). The test suite
turns it on (Makefile, tests/conftest.py): its two workers, the servers and Celery
workers its integration tests start, and the next run read each other's vectors
instead of embedding the demo's ~3,000 example texts again per process (about a
minute of CPU each). A deployment shares vectors through the database instead
(catalog.search.vectors, TextEmbedding); this file is a local memo of model outputs, keyed
like TextEmbedding by the model's full name and the text, so a vector made by
another model is never read.

Every process opens its own connection (WAL, so readers never wait for a writer);
a vector is written once (INSERT OR IGNORE): two processes racing to write the same
text write the same bytes. A file that cannot be opened or written is an error, not
a silent fallback: the setting asked for it.

Processes that need the same new texts at once (the test suite's two workers
building the demo catalog on a fresh clone) share the work (`embed`): the texts
go in batches, a process claims a batch with a lock on one byte of the file
beside the vectors (`<file>.claims`), skips a batch another process holds and
comes back to it at the end, when it is in the file. Each text is embedded once
and both cores work, where each worker used to embed everything itself.
"""

import fcntl
import hashlib
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from django.conf import settings

TIMEOUT = 60  # seconds a process waits for another's lock on the file
CHUNK = 500  # keys per query (SQLite's variable limit)
SHARE = 64  # texts per claimed batch: one forward batch of the MiniLM model, a few hundred ms of e5
CLAIM_SLOTS = 2**30  # bytes of the claims file a batch's lock may fall on
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
        connection = sqlite3.connect(file, timeout=TIMEOUT, isolation_level=None)
        _prepare(connection)
        connections[key] = connection
    return connections[key]


def _prepare(connection: sqlite3.Connection) -> None:
    """WAL mode and the table. Switching a file to WAL while another process writes it (two processes making a new
    file at once: the suite's workers on a fresh clone) fails at once with "database is locked": SQLite does not
    wait on its busy timeout there, since both connections could be waiting on each other. So it is tried again."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("CREATE TABLE IF NOT EXISTS vector (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def read(model_name: str, texts: list[str]) -> dict[str, np.ndarray]:
    """The cached vectors of those `texts` that have one, by text (empty when the cache is off)."""
    file = path()
    return _read_from(file, model_name, texts) if file and texts else {}


def embed(model_name: str, texts: list[str], forward) -> dict[str, np.ndarray]:
    """The vectors of `texts` (none of them in the file when asked) by `forward`, kept in the file; a batch that
    another process is embedding at the same time is read from the file when it has finished, not embedded again."""
    file = path()
    if not file:
        return dict(zip(texts, forward(texts), strict=True))
    claims = _claims(file)
    # Shortest first (MiniLM pads a batch to its longest text); the same texts make the same batches in every process.
    ordered = sorted(dict.fromkeys(texts), key=lambda text: (len(text), text))
    batches = [ordered[start : start + SHARE] for start in range(0, len(ordered), SHARE)]
    made: dict[str, np.ndarray] = {}
    held_elsewhere = []
    for batch in batches:
        slot = _slot(model_name, batch)
        try:
            fcntl.lockf(claims, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
        except OSError:  # another process holds it
            held_elsewhere.append((batch, slot))
            continue
        made |= _embed_claimed(file, model_name, batch, forward, claims, slot)
    for batch, slot in held_elsewhere:
        fcntl.lockf(claims, fcntl.LOCK_EX, 1, slot)  # until the other process has written it
        made |= _embed_claimed(file, model_name, batch, forward, claims, slot)
    return made


def _embed_claimed(file, model_name, batch, forward, claims, slot) -> dict[str, np.ndarray]:
    try:
        vectors = _read_from(file, model_name, batch)
        missing = [text for text in batch if text not in vectors]
        if missing:
            fresh = dict(zip(missing, forward(missing), strict=True))
            _write_to(file, model_name, fresh)
            vectors |= fresh
        return vectors
    finally:
        fcntl.lockf(claims, fcntl.LOCK_UN, 1, slot)


def _slot(model_name: str, batch: list[str]) -> int:
    digest = hashlib.sha256("\n".join([model_name, *batch]).encode()).digest()
    return int.from_bytes(digest[:8], "big") % CLAIM_SLOTS


def _claims(file: str):
    """This process's one descriptor of the claims file: POSIX record locks belong to the process and closing any
    descriptor of the file drops them all, so it is opened once and kept."""
    key = (os.getpid(), file)  # a forked child opens its own: its parent's locks are not its own
    if key not in _claims_files:
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        _claims_files[key] = open(f"{file}.claims", "a+b")  # noqa: SIM115 -- kept open for the life of the process
    return _claims_files[key]


_claims_files: dict[tuple[int, str], object] = {}


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
