"""What the conversation history costs in PostgreSQL: rows and bytes of each table a turn writes, per turn.

Read-only. Bytes are pg_total_relation_size (table, TOAST and indexes) as the server reports them, so free
space inside the files is counted as disk; rows are exact counts. Turns of every status are counted, the
per-turn figures are totals over turns. Conversations are listed too: an API request without a conversation
starts one (retention removes it with its last turn).
"""

from dataclasses import dataclass

from django.db import connection

from agents.models import Conversation, Message, RoutingLog, Turn, TurnEvent

# The tables that grow with traffic, in the order a turn writes them.
PER_TURN_MODELS = (Conversation, Turn, TurnEvent, Message, RoutingLog)


@dataclass(frozen=True)
class TableStorage:
    table: str
    rows: int
    bytes: int


@dataclass(frozen=True)
class TurnStorage:
    turns: int
    tables: list[TableStorage]

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables)

    def per_turn(self, value: int) -> float | None:
        return value / self.turns if self.turns else None


class NotPostgreSQL(RuntimeError):
    pass


def turn_storage() -> TurnStorage:
    """Rows and on-disk bytes of the per-turn tables of the current database (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        raise NotPostgreSQL(f"table sizes are read from PostgreSQL; this database is {connection.vendor}")
    tables = []
    with connection.cursor() as cursor:
        for model in PER_TURN_MODELS:
            table = model._meta.db_table
            cursor.execute(f'SELECT count(*), pg_total_relation_size(%s) FROM "{table}"', [table])
            rows, size = cursor.fetchone()
            tables.append(TableStorage(table=table, rows=rows, bytes=size))
    return TurnStorage(turns=next(t.rows for t in tables if t.table == Turn._meta.db_table), tables=tables)
