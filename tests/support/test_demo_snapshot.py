"""The tests' copy of the demo catalog (tests/support/demo_snapshot.py) writes what load_demo_catalog() writes."""

import pytest
from django.apps import apps
from django.db import models, transaction

from catalog.models import CatalogState, Tool
from catalog.search import embeddings
from demo.catalog import load_demo_catalog
from tests.catalog.search.test_search import bag_of_words_embedder
from tests.support import demo_snapshot
from tests.support.builders import make_tool

pytestmark = pytest.mark.django_db


def every_row() -> dict[str, list[tuple]]:
    """Each table's rows, without the values a second load may differ in: clock times, the state's stamp, the
    numbers the database gave as keys (a key becomes its row's place in its table, and so does a reference to it),
    since the sequences have moved on when another test wrote before this one, and the order of a many-to-many
    table's pairs."""
    every_model = apps.get_models(include_auto_created=True)
    places = {
        model: {pk: place for place, pk in enumerate(model._base_manager.order_by("pk").values_list("pk", flat=True))}
        for model in every_model
    }
    rows = {}
    for model in every_model:
        fields = [
            f
            for f in model._meta.concrete_fields
            if not isinstance(f, models.DateTimeField) and not (model is CatalogState and f.name == "stamp")
        ]

        def place(field, value, model=model):
            if field.primary_key and model in places:
                return places[model].get(value, value)
            if field.is_relation and field.related_model in places:
                return places[field.related_model].get(value, value)
            return value

        placed = [
            tuple(place(f, v) for f, v in zip(fields, row, strict=True))
            for row in model._base_manager.order_by("pk").values_list(*[f.attname for f in fields])
        ]
        if model._meta.auto_created:
            # A many-to-many table's rows are pairs without an order of their own: Django adds them in the order
            # of a set of the targets' keys, which follows the keys' values, so a load under other keys adds the
            # same pairs in another order.
            placed = sorted(row[1:] for row in placed)
        rows[model._meta.label] = placed
    return rows


def rolled_back(write) -> tuple[dict[str, list[tuple]], object]:
    with transaction.atomic():
        value = write()
        rows = every_row()
        transaction.set_rollback(True)
    return rows, value


@pytest.fixture
def real_loads(monkeypatch):
    """Count the real loads demo_snapshot makes from here on."""
    calls = []

    def counted():
        calls.append(1)
        return load_demo_catalog()

    rolled_back(demo_snapshot.demo_catalog)  # the first in this process may load for real
    monkeypatch.setattr(demo_snapshot, "load_demo_catalog", counted)
    return calls


def test_the_copy_holds_every_row_a_real_load_writes(real_loads):
    copied, copied_summary = rolled_back(demo_snapshot.demo_catalog)
    assert real_loads == []
    loaded, loaded_summary = rolled_back(load_demo_catalog)
    assert copied == loaded and copied_summary == loaded_summary
    assert len(copied["catalog.Tool"]) >= 90


def test_the_copy_keeps_the_state_the_process_indexed_and_a_change_moves_it():
    rolled_back(demo_snapshot.demo_catalog)
    with transaction.atomic():
        demo_snapshot.demo_catalog()
        copied = CatalogState.objects.get()
        transaction.set_rollback(True)
    demo_snapshot.demo_catalog()
    again = CatalogState.objects.get()
    assert (again.version, again.stamp) == (copied.version, copied.stamp)
    make_tool("a_new_tool")
    assert CatalogState.objects.get().stamp != copied.stamp


def test_a_database_that_already_has_tools_gets_a_real_load(real_loads):
    _, demo = rolled_back(demo_snapshot.demo_catalog)
    make_tool("an_operators_tool")
    summary = demo_snapshot.demo_catalog()
    assert real_loads == [1]
    assert summary.tools == demo.tools + 1 == Tool.objects.count()
    assert Tool.objects.filter(name="an_operators_tool").exists()


def stand_in(embedded: list, computes=None):
    """An embedder in place of the dense model: records the texts, returns bag-of-words vectors."""

    def embed(texts, *, model=None):
        embedded.append(list(texts))
        return bag_of_words_embedder(texts)

    if computes is not None:
        embed.computes = computes
    return embed


def test_a_replaced_embedder_gets_a_real_load(real_loads, monkeypatch):
    embedded = []
    monkeypatch.setattr(embeddings, "embed_texts", stand_in(embedded))
    demo_snapshot.demo_catalog()
    assert real_loads == [1]
    assert embedded, "the demo's examples were embedded by the replaced embedder, not copied"


def test_stand_ins_that_name_the_same_computation_share_a_copy(real_loads, monkeypatch):
    first, second = [], []
    monkeypatch.setattr(embeddings, "embed_texts", stand_in(first, computes=bag_of_words_embedder))
    loaded, _ = rolled_back(demo_snapshot.demo_catalog)  # real, or a copy from an earlier test's stand-in
    loads = len(real_loads)
    monkeypatch.setattr(embeddings, "embed_texts", stand_in(second, computes=bag_of_words_embedder))
    copied, _ = rolled_back(demo_snapshot.demo_catalog)
    assert len(real_loads) == loads and second == [] and copied == loaded


def test_a_create_after_the_copy_gets_a_fresh_key():
    demo_snapshot.demo_catalog()
    highest = Tool.objects.order_by("-pk").values_list("pk", flat=True).first()
    assert make_tool("created_after_the_copy").pk > highest
