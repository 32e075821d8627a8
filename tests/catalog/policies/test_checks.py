"""System checks: fail closed on tools without a decided policy (check --deploy), warn on oversized schemas,
and never query the database, nor block an operation, outside the commands Django runs database checks for."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.policies.checks import tool_schemas_fit_the_token_gate, tools_await_a_policy, tools_have_a_decided_policy
from tests.support import migrated_db
from tests.support.builders import make_policy, make_tool

pytestmark = pytest.mark.django_db
DEFAULT = ["default"]


def test_a_new_tool_without_policy_fails_check_deploy_and_is_named():
    make_policy(make_tool("fine_tool"))
    make_tool("new_tool")
    (error,) = tools_have_a_decided_policy(databases=DEFAULT)
    assert error.id == "catalog.E001"
    assert "new_tool (no policy)" in error.msg and "fine_tool" not in error.msg
    with pytest.raises(SystemCheckError, match="new_tool"):
        call_command("check", deploy=True)


def test_draft_fails_rejected_and_disabled_pass():
    make_policy(make_tool("drafted"), status="draft")
    make_policy(make_tool("refused"), status="rejected")
    make_tool("switched_off", enabled=False)
    (error,) = tools_have_a_decided_policy(databases=DEFAULT)
    assert "drafted (draft)" in error.msg
    assert "refused" not in error.msg and "switched_off" not in error.msg


def test_every_tool_decided_means_no_error():
    make_policy(make_tool("fine_tool"))
    assert tools_have_a_decided_policy(databases=DEFAULT) == []
    assert tools_await_a_policy(databases=DEFAULT) == []
    call_command("check", deploy=True, databases=DEFAULT)


def test_check_database_reports_tools_awaiting_a_policy_as_a_warning(capsys):
    make_tool("new_tool")
    (warning,) = tools_await_a_policy(databases=DEFAULT)
    assert warning.id == "catalog.W002" and "new_tool (no policy)" in warning.msg
    call_command("check", databases=DEFAULT)  # a warning: the command succeeds and says so
    assert "catalog.W002" in capsys.readouterr().err


def test_commands_without_databases_run_no_query_and_pass_while_a_tool_awaits_a_policy():
    make_tool("new_tool")
    with CaptureQueriesContext(connection) as queries:
        call_command("check")
    assert [q["sql"] for q in queries.captured_queries if "catalog_tool" in q["sql"]] == []
    assert tools_await_a_policy() == [] and tool_schemas_fit_the_token_gate() == []


def test_migrate_runs_its_checks_and_works_while_a_tool_awaits_a_policy():
    make_tool("new_tool")
    call_command("migrate", verbosity=0, skip_checks=False)  # Django runs the database checks here, with databases


@pytest.mark.django_db(transaction=False)
def test_operations_work_on_the_demo_database_whose_tools_await_a_policy(tmp_path):
    """The issue's case, as an operator runs it: a file database with the demo catalog (three tools undecided)."""
    from tests.toolhub.test_settings import run_python

    def manage(*args, **env):
        return run_python(["manage.py", *args], tmp_path, TOOLHUB_SEARCH_EMBEDDINGS="0", **env)

    # Migrated as `manage.py migrate` makes a new file (the fast stage's copy of a fresh migration,
    # tests/support/migrated_db.py: ~4 s less than migrating again), then loaded with the demo catalog.
    if not migrated_db.copy_to(tmp_path / "toolhub.sqlite3"):
        assert manage("migrate", "--noinput").returncode == 0
    assert manage("load_demo_catalog").returncode == 0
    for step in (
        ["migrate", "--noinput"],
        ["makemigrations", "--check", "--dry-run"],
        ["createsuperuser", "--noinput", "--username", "oncall", "--email", "oncall@example.com"],
        ["check", "--database", "default"],
    ):
        result = manage(*step, DJANGO_SUPERUSER_PASSWORD="a-long-on-call-password-4821")
        assert result.returncode == 0, (step, result.stdout + result.stderr)
    assert "catalog.W002" in result.stderr  # check --database names them, without failing
    deploy = manage("check", "--deploy")
    assert deploy.returncode != 0 and "catalog.E001" in deploy.stderr


def test_a_tool_over_the_schema_token_cap_is_a_warning(settings):
    tool = make_tool("huge_tool")
    settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS = tool.schema_tokens - 1
    (warning,) = tool_schemas_fit_the_token_gate(databases=DEFAULT)
    assert warning.id == "catalog.W001" and "huge_tool" in warning.msg
    settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS = tool.schema_tokens
    assert tool_schemas_fit_the_token_gate(databases=DEFAULT) == []
