"""The demo server's SQLite store: one table per Loyalty entity, each row an id and its JSON record.

A record is the entity as tools show it, its id included (`campaign_id`,
`member_id`, ...). Every tool call runs in one `BEGIN IMMEDIATE` transaction,
so several server processes on one file never interleave a read-modify-write.
Never imports Django.
"""

from __future__ import annotations

import datetime
import json
import secrets
import sqlite3
import string
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from demo.data.loyalty_schemas import ID_PREFIXES

# Entity -> table. The points ledger is the points_transaction table.
TABLES = {
    "campaign": "campaigns",
    "rule": "rules",
    "rule_draft": "rule_drafts",
    "reward": "rewards",
    "member": "members",
    "tier": "tiers",
    "voucher": "vouchers",
    "points_transaction": "points_ledger",
    "segment": "segments",
}
_ID_ALPHABET = string.ascii_lowercase + string.digits

Record = dict[str, Any]


class ToolError(Exception):
    """A tool call that cannot be done; the caller gets it as an error result, the server keeps running."""


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def id_key(entity: str) -> str:
    return "draft_id" if entity == "rule_draft" else f"{entity}_id"


def new_id(entity: str) -> str:
    """An id the tool schemas accept, e.g. cmp_4k9s2m1p."""
    return f"{ID_PREFIXES[entity]}_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


class Store:
    def __init__(self, path: str):
        # Autocommit mode: transactions are opened explicitly by `transaction()`.
        self.db = sqlite3.connect(path, isolation_level=None, timeout=10)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=10000")
        with self.transaction():
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            for table in TABLES.values():
                self.db.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} "
                    "(id TEXT PRIMARY KEY, data TEXT NOT NULL, created_at TEXT NOT NULL)"
                )

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # --- meta -----------------------------------------------------------------

    def flag(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_flag(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # --- records --------------------------------------------------------------

    def get(self, entity: str, record_id: str) -> Record | None:
        row = self.db.execute(f"SELECT data FROM {TABLES[entity]} WHERE id = ?", (record_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def need(self, entity: str, record_id: str) -> Record:
        """The record, or a ToolError naming what is missing."""
        record = self.get(entity, record_id) if isinstance(record_id, str) else None
        if record is None:
            raise ToolError(f"{entity.replace('_', ' ')} {record_id} does not exist.")
        return record

    def all(self, entity: str) -> list[Record]:
        rows = self.db.execute(f"SELECT data FROM {TABLES[entity]} ORDER BY created_at, id").fetchall()
        return [json.loads(data) for (data,) in rows]

    def where(self, entity: str, **equal: Any) -> list[Record]:
        """Records whose top-level fields equal the given values."""
        return [r for r in self.all(entity) if all(r.get(k) == v for k, v in equal.items())]

    def insert(self, entity: str, data: Record, record_id: str | None = None) -> Record:
        record_id = record_id or new_id(entity)
        stamp = data.get("created_at") or now()
        record = {id_key(entity): record_id, **data, "created_at": stamp}
        self.db.execute(
            f"INSERT INTO {TABLES[entity]} (id, data, created_at) VALUES (?, ?, ?)",
            (record_id, json.dumps(record, ensure_ascii=False), stamp),
        )
        return record

    def save(self, entity: str, record: Record) -> Record:
        record["updated_at"] = now()
        self.db.execute(
            f"UPDATE {TABLES[entity]} SET data = ? WHERE id = ?",
            (json.dumps(record, ensure_ascii=False), record[id_key(entity)]),
        )
        return record

    def delete(self, entity: str, record_id: str) -> None:
        self.db.execute(f"DELETE FROM {TABLES[entity]} WHERE id = ?", (record_id,))
