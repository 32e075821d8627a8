"""storage_per_turn: rows and bytes of the tables a turn writes, per turn, as PostgreSQL reports them."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from agents.models import Conversation
from tests.support.builders import make_old_turns, make_user

pytestmark = pytest.mark.django_db


def storage_figures() -> dict:
    out = StringIO()
    call_command("storage_per_turn", stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.mark.postgres  # pg_total_relation_size
def test_rows_per_turn_are_each_tables_rows_over_the_turns_and_bytes_what_postgres_reports():
    make_old_turns(Conversation.objects.create(owner=make_user()), 4)

    figures = storage_figures()

    tables = figures["tables"]
    assert figures["turns"] == 4
    assert {name: t["rows"] for name, t in tables.items()} == {
        "agents_conversation": 1, "agents_turn": 4, "agents_turnevent": 12, "agents_message": 8,
        "agents_routinglog": 4,
    }  # fmt: skip
    assert tables["agents_turnevent"]["rows_per_turn"] == 3.0 and tables["agents_conversation"]["rows_per_turn"] == 0.25
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('agents_turnevent')")
        assert tables["agents_turnevent"]["bytes"] == cursor.fetchone()[0] > 0
    assert tables["agents_turnevent"]["bytes_per_turn"] == round(tables["agents_turnevent"]["bytes"] / 4)
    assert figures["bytes"] == sum(t["bytes"] for t in tables.values())
    assert figures["bytes_per_turn"] == round(figures["bytes"] / 4)


@pytest.mark.postgres
def test_no_turns_gives_no_per_turn_figures():
    figures = storage_figures()

    assert figures["turns"] == 0 and figures["bytes_per_turn"] is None
    assert all(t["rows_per_turn"] is None for t in figures["tables"].values())


def test_on_sqlite_the_command_says_it_needs_postgresql():
    with pytest.raises(CommandError, match="PostgreSQL"):
        call_command("storage_per_turn", stdout=StringIO())
