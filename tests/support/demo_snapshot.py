"""The demo catalog for tests: `load_demo_catalog()` once per process, then its rows copied back into each test.

Every test's transaction is rolled back, so the rows of the first load are gone by
the next test. Loading again costs about a second (a hundred tools, policies and
their versions, each saved and signalled one by one); copying the rows back costs a
few bulk inserts. The copy includes CatalogState as it was after the load, so the
search and example indexes this process built for that state stay valid: a test
that changes the catalog moves the state and the next search rebuilds, as in use.

The copy is what a real load would have written, or the real load runs instead:
- the tables the load writes must hold exactly what they held before a load this
  process made (usually nothing but migrated rows), else `load_demo_catalog()` runs
  for real (and its rows are kept too: a few such starting points are remembered);
- the rows depend on the embedder (seed_examples stores vectors) and the settings it
  reads, so a test that replaced `embed_texts` or switched dense search off gets a
  real load, never a copy made under other conditions. A stand-in names what it computes
  (`embed.computes`: counted_embedder's records each call and returns the bag-of-words
  vectors), so tests under the same stand-in share their copy; texts embedded by a real
  load are then not among the stand-in's recorded calls.

Never used for a test of load_demo_catalog itself (tests/demo/test_demo_catalog.py calls it).

`replayed(name, load, *key)` does the same for any load: the browser tests' demo data
(tests/browser/conftest.py: the demo catalog, the synced Loyalty server, stored vectors) is
copied into each test after the module's first real load. Only for loads whose rows point at
nothing outside what they write and the migrated rows: a transactional test's flush makes
content types and permissions again under new ids, so users' groups are not copied.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.apps import apps
from django.core.management.color import no_style
from django.db import connection, transaction
from django.db.models import sql
from django.utils import timezone

from catalog.search import embeddings
from demo.catalog import DemoSummary, load_demo_catalog


@dataclass
class _TableChange:
    model: type
    before: list[tuple]  # every row (values_list ordered by pk) before the load
    inserted: list  # instances the load created
    updated: list  # instances that existed before and the load changed
    # The INSERT statements (SQL, parameters) of `inserted`, compiled by the first restore for this process's
    # database: a restore then runs them as they are instead of bulk_create preparing ~1,300 rows' values again
    # (44 -> 7 ms a restore, some 200 restores a fast stage).
    statements: list[tuple[str, tuple]] | None = None

    def insert_statements(self) -> list[tuple[str, tuple]]:
        if self.statements is None:
            fields = self.model._meta.concrete_fields
            # PostgreSQL sets no batch size (it answers the row count: 0 when the load inserted nothing here).
            size = connection.ops.bulk_batch_size(fields, self.inserted) or len(self.inserted) or 1
            self.statements = []
            for start in range(0, len(self.inserted), size):
                query = sql.InsertQuery(self.model)
                query.insert_values(fields, self.inserted[start : start + size])
                self.statements.extend(query.get_compiler(connection=connection).as_sql())
        return self.statements


@dataclass
class _Snapshot:
    key: tuple
    changes: list[_TableChange]
    summary: object  # what the load returned


T = TypeVar("T")


_snapshots: list[_Snapshot] = []  # newest last
KEPT_SNAPSHOTS = 4


def demo_catalog() -> DemoSummary:
    """What `load_demo_catalog()` returns and writes, from this process's first load when that is the same."""
    return replayed("demo_catalog", load_demo_catalog)


def replayed(name: str, load: Callable[[], T], *extra_key: object) -> T:
    """What `load()` returns and writes: copied from this process's first run of the load called `name` with
    the same `extra_key` when the tables it writes hold what they held before that run (the rules above),
    else a real run."""
    conditions = _conditions()
    key = (name, *extra_key, *conditions)
    for snapshot in reversed(_snapshots):
        if snapshot.key == key and _tables_as_before(snapshot):
            _restore(snapshot)
            return snapshot.summary
    before = {model: _rows(model) for model in _models()}
    summary = load()
    changes = []
    for model, rows in before.items():
        after = _rows(model)
        if after == rows:
            continue
        known = {row[0]: row for row in rows}
        instances = {obj.pk: obj for obj in model._base_manager.order_by("pk")}
        changed = [row[0] for row in after if row[0] in known and known[row[0]] != row]
        changes.append(
            _TableChange(
                model=model,
                before=rows,
                inserted=[obj for pk, obj in instances.items() if pk not in known],
                updated=[instances[pk] for pk in changed],
            )
        )
    if _conditions() == conditions:  # the load itself changed nothing the key reads
        _snapshots.append(_Snapshot(key=key, changes=changes, summary=summary))
        del _snapshots[:-KEPT_SNAPSHOTS]
    return summary


def _conditions() -> tuple:
    embed = embeddings.embed_texts
    return (
        getattr(embed, "computes", embed),  # a stand-in that records its calls is keyed by what it computes
        embeddings.dense_enabled(),
        embeddings.search_model(),
        timezone.localdate(),  # knowledge's last_reviewed is counted back from today
    )


def _models() -> list[type]:
    return [model for model in apps.get_models(include_auto_created=True) if model._meta.managed]


def _rows(model) -> list[tuple]:
    return list(model._base_manager.order_by("pk").values_list())


def _tables_as_before(snapshot: _Snapshot) -> bool:
    return all(_rows(change.model) == change.before for change in snapshot.changes)


def _restore(snapshot: _Snapshot) -> None:
    with transaction.atomic(), connection.cursor() as cursor:  # foreign keys are checked at the end
        for change in snapshot.changes:
            for statement, parameters in change.insert_statements():
                cursor.execute(statement, parameters)
            for obj in change.updated:
                fields = {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if not f.primary_key}
                change.model._base_manager.filter(pk=obj.pk).update(**fields)
    # Rows inserted with their keys leave PostgreSQL's sequences behind; the next create() must not collide.
    statements = connection.ops.sequence_reset_sql(no_style(), [change.model for change in snapshot.changes])
    if statements:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
