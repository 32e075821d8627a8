"""Namespaces: a clash is resolved by the server's prefix and shown; renames carry policies and examples along."""

import json
import os
import sys

import pytest
from django.test import override_settings
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from agents.providers import ToolCall
from agents.turns.tool_calls import execute
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.names import MCP_TOOL_NAME, plain_name, prefixed_name
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool, ToolExample, ToolPolicy
from catalog.models.schemas import MCP_PREFIX_PATTERN, TOOL_NAME_PATTERN
from catalog.policies.bundle import build_bundle
from catalog.policies.decision import RoutingDecision, load_catalog
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db

GENERATED = ["-m", "tests.support.generated_mcp_server"]


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    mcp_client.close_all()


def generated(name="gen", count=2, *extra) -> McpServer:
    return McpServer.objects.create(name=name, command=sys.executable, args=[*GENERATED, "--tools", str(count), *extra])


def run(name: str, arguments: dict | None = None):
    """A call as the runtime makes it, under a permissive read policy."""
    bundle = build_bundle(RoutingDecision(), load_catalog(), recommended=(name,))
    return execute(ToolCall("c1", name, json.dumps(arguments or {"q": "x"})), bundle, emit=lambda *a, **k: None,
                   max_result_tokens=500)  # fmt: skip


def processes_with(marker: str) -> list[int]:
    """Pids of this machine's processes whose command line contains `marker`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


# --- names ---------------------------------------------------------------------------------------------


@given(
    upstream=st.from_regex(MCP_TOOL_NAME, fullmatch=True),
    prefix=st.from_regex(MCP_PREFIX_PATTERN, fullmatch=True).filter(lambda p: len(p) <= 32),
)
def test_every_name_a_server_may_send_becomes_a_name_models_and_mcp_clients_accept(upstream, prefix):
    assert TOOL_NAME_PATTERN.match(plain_name(upstream))
    assert TOOL_NAME_PATTERN.match(prefixed_name(prefix, upstream))
    assert MCP_TOOL_NAME.match(prefixed_name(prefix, upstream))


def test_dots_become_underscores_and_long_names_end_in_a_hash_so_they_stay_apart():
    long_a, long_b = "a" * 100 + "_one", "a" * 100 + "_two"

    assert plain_name("github.search_issues") == "github_search_issues"
    assert prefixed_name("time", "get_current_time") == "time__get_current_time"
    assert len(plain_name(long_a)) == 64 and plain_name(long_a) != plain_name(long_b)
    assert len(prefixed_name("x" * 32, "get_current_time" * 4)) == 64


def test_a_server_gets_a_prefix_from_its_name_and_a_second_one_a_numbered_prefix():
    first = McpServer.objects.create(name="mcp-server-time", command="x")
    second = McpServer.objects.create(name="mcp_server_time", command="x")

    assert (first.prefix, second.prefix) == ("mcp_server_time", "mcp_server_time_2")
    with pytest.raises(Exception, match="prefix"):
        McpServer(name="bad", command="x", prefix="a__b").full_clean()


# --- clashes -------------------------------------------------------------------------------------------


def test_a_name_a_builtin_tool_has_is_taken_with_the_prefix_and_shown_never_rejecting_the_server():
    builtin = make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    server = generated("gen", 2)

    result = sync_server(server)

    assert result.ok, result.error
    assert sorted(result.new) == ["gen__gen_tool_0001", "gen_tool_0002"]
    assert result.prefixed == {"gen__gen_tool_0001": "the builtin tool is named gen_tool_0001"}
    assert "1 named with the prefix (gen__gen_tool_0001: the builtin tool is named gen_tool_0001)" in (
        server.status_message
    )
    assert Tool.objects.get(pk=builtin.pk).name == "gen_tool_0001"  # builtin tools keep their names
    prefixed = Tool.objects.get(name="gen__gen_tool_0001")
    assert (prefixed.upstream_name, prefixed.source) == ("gen_tool_0001", Tool.Source.MCP)
    assert server.tool_names == ["gen__gen_tool_0001", "gen_tool_0002"]


def test_two_servers_with_the_same_tool_names_both_import_and_a_call_reaches_the_right_one():
    sync_server(generated("first", 1))
    result = sync_server(generated("second", 1))

    assert result.ok and result.new == ["second__gen_tool_0001"]
    assert "MCP server 'first'" in result.prefixed["second__gen_tool_0001"]
    for name in ("gen_tool_0001", "second__gen_tool_0001"):
        make_policy(Tool.objects.get(name=name))

    outcome = run("second__gen_tool_0001")

    assert not outcome.is_error, outcome.content
    assert json.loads(outcome.content) == {"tool": "gen_tool_0001", "arguments": {"q": "x"}}  # the server's name


def test_a_prefixed_name_stays_when_the_clash_goes_away():
    builtin = make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    server = generated("gen", 1)
    sync_server(server)
    builtin.delete()

    result = sync_server(server)

    assert result.ok and result.unchanged == ["gen__gen_tool_0001"] and result.new == []
    assert server.tool_names == ["gen__gen_tool_0001"]


def test_toolhubs_search_tool_name_is_never_taken_by_a_server():
    result = sync_server(generated("gen", 0, "--extra", "tool_search"))

    assert result.new == ["gen__tool_search"]
    assert "toolhub's search tool" in result.prefixed["gen__tool_search"]


def test_dotted_and_long_names_are_fitted_and_called_by_the_servers_own_name():
    long_name = "lookup_" + "x" * 90
    server = generated("gen", 0, "--extra", "github.search", "--extra", long_name)

    result = sync_server(server)

    fitted = plain_name(long_name)
    assert sorted(result.new) == sorted(["github_search", fitted]) and len(fitted) == 64
    for name in result.new:
        make_policy(Tool.objects.get(name=name))
    assert json.loads(run("github_search").content)["tool"] == "github.search"
    assert json.loads(run(fitted).content)["tool"] == long_name


# --- a prefix change -----------------------------------------------------------------------------------


def test_changing_the_prefix_on_the_page_renames_the_prefixed_tools_and_their_policies_and_examples_follow(client):
    make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    server = generated("gen", 2)
    sync_server(server)
    tool = Tool.objects.get(name="gen__gen_tool_0001")
    policy = make_policy(tool)
    example = ToolExample.objects.create(tool=tool, text="look up area one", approved=True)
    client.force_login(make_user(username="admin", role="admin"))
    form = {"name": "gen", "prefix": "area", "transport": "stdio", "command": server.command,
            "args": json.dumps(server.args), "env": "{}", "headers": "{}", "url": "", "enabled": "on",
            "connection_scope": "per_user"}  # fmt: skip

    response = client.post(reverse("mcp-server-edit", args=["gen"]), form)

    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.name == "area__gen_tool_0001" and tool.upstream_name == "gen_tool_0001"
    assert ToolPolicy.objects.get(pk=policy.pk).tool_id == tool.pk and tool.policy.status == ToolPolicy.Status.ACTIVE
    assert ToolExample.objects.get(pk=example.pk).tool_id == tool.pk
    assert Tool.objects.filter(name="gen_tool_0002").exists()  # unprefixed names do not move
    server.refresh_from_db()
    assert server.prefix == "area" and server.tool_names == ["area__gen_tool_0001", "gen_tool_0002"]
    again = sync_server(server)
    assert again.ok and sorted(again.unchanged) == ["area__gen_tool_0001", "gen_tool_0002"] and not again.new
    assert not run("area__gen_tool_0001").is_error


def test_a_prefix_that_would_clash_is_refused_on_the_field_and_nothing_is_renamed(client):
    make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    make_tool("other__gen_tool_0001", source=Tool.Source.IMPORT)
    server = generated("gen", 1)
    sync_server(server)
    client.force_login(make_user(username="admin", role="admin"))
    form = {"name": "gen", "prefix": "other", "transport": "stdio", "command": server.command,
            "args": json.dumps(server.args), "env": "{}", "headers": "{}", "url": "", "enabled": "on",
            "connection_scope": "per_user"}  # fmt: skip

    response = client.post(reverse("mcp-server-edit", args=["gen"]), form)

    assert response.status_code == 200
    assert "other__gen_tool_0001 (the import tool has that name)" in response.context["form"].errors["prefix"][0]
    server.refresh_from_db()
    assert server.prefix == "gen" and Tool.objects.filter(name="gen__gen_tool_0001").exists()


def test_a_prefix_changed_outside_the_form_is_followed_by_the_next_sync():
    make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    server = generated("gen", 1)
    sync_server(server)
    policy = make_policy(Tool.objects.get(name="gen__gen_tool_0001"))
    McpServer.objects.filter(pk=server.pk).update(prefix="moved")

    result = sync_server(McpServer.objects.get(pk=server.pk))

    assert result.ok and result.unchanged == ["moved__gen_tool_0001"]
    assert ToolPolicy.objects.get(pk=policy.pk).tool.name == "moved__gen_tool_0001"


# --- bad listings --------------------------------------------------------------------------------------


def test_invalid_names_duplicates_and_invalid_output_schemas_are_rejected_with_reasons_and_the_rest_imported():
    server = generated("gen", 3, "--extra", "has space", "--extra", "ünïcode", "--duplicate", "gen_tool_0002",
                       "--bad-output-schema", "gen_tool_0003")  # fmt: skip

    result = sync_server(server)

    assert result.ok and result.new == ["gen_tool_0001"]
    assert set(result.rejected) == {"has space", "ünïcode", "gen_tool_0002", "gen_tool_0003"}
    assert "not a valid MCP tool name" in result.rejected["has space"]
    assert "listed 2 times" in result.rejected["gen_tool_0002"]
    assert "output schema is not valid JSON Schema" in result.rejected["gen_tool_0003"]
    assert Tool.objects.count() == 1 and server.status == McpServer.Status.OK


def test_a_server_listing_ten_thousand_tools_is_refused_whole_and_its_process_stopped(tmp_path):
    marker = str(tmp_path / "ten-thousand")
    server = generated("huge", 10_000, "--extra", "marker", "--malformed", marker)

    result = sync_server(server)

    assert not result.ok
    assert "lists more than 2,000 tools" in result.error and "TOOLHUB_MCP_MAX_TOOLS" in result.error
    assert Tool.objects.count() == 0 and server.status == McpServer.Status.ERROR and server.tool_names == []
    assert processes_with(marker) == []


@override_settings(TOOLHUB_MCP_MAX_TOOLS=50_000)
def test_the_tool_limit_is_a_setting():
    result = sync_server(generated("wide", 60))
    assert result.ok and len(result.new) == 60


def test_a_failed_sync_leaves_no_server_process_running(tmp_path):
    marker = str(tmp_path / "failing")
    server = generated("slow", 1, "--malformed", marker)
    sync_server(server)
    assert processes_with(marker)  # a good sync keeps the connection for calls

    with override_settings(TOOLHUB_MCP_MAX_TOOLS=0):
        result = sync_server(server)

    assert not result.ok and processes_with(marker) == []


def test_the_servers_page_shows_its_prefix_and_which_tools_carry_it_and_why(client):
    make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    server = generated("gen", 1)
    sync_server(server)
    client.force_login(make_user(username="viewer", role="viewer"))

    page = client.get(reverse("mcp-server-detail", args=["gen"])).content.decode()

    assert "<dt>Prefix</dt><dd><code>gen</code>" in page
    assert 'href="/catalog/gen__gen_tool_0001/">gen__gen_tool_0001</a>' in page
    assert "its server calls it <code>gen_tool_0001</code>" in page
    assert "<code>gen__gen_tool_0001</code>: the builtin tool is named gen_tool_0001" in page
    assert "<code>gen</code></td>" in client.get(reverse("mcp-servers")).content.decode()


# Transactional (it migrates); pytest-django runs such tests after the others, which keep their migrated rows.
@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_servers_their_prefix_and_records_each_served_tools_name_without_renaming_any():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("catalog", "0008_tool_embedding_per_model")], [("catalog", "0009_mcp_namespaces")]
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        schema = {"type": "object", "properties": {}}
        for name in ("list_campaigns", "get_member", "calculate"):
            old.get_model("catalog", "Tool").objects.create(name=name, description="d", input_schema=schema,
                                                             schema_hash=name)  # fmt: skip
        old.get_model("catalog", "McpServer").objects.create(name="loyalty", tool_names=["list_campaigns"],
                                                              missing_tool_names=["get_member"])  # fmt: skip
        old.get_model("catalog", "McpServer").objects.create(name="Loyalty-", command="x")

        executor = MigrationExecutor(connection)
        executor.migrate(after)

        new = executor.loader.project_state(after).apps
        assert sorted(new.get_model("catalog", "McpServer").objects.values_list("prefix", flat=True)) == [
            "loyalty", "loyalty_2"]  # fmt: skip
        names = dict(new.get_model("catalog", "Tool").objects.values_list("name", "upstream_name"))
        assert names == {"list_campaigns": "list_campaigns", "get_member": "get_member", "calculate": ""}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())  # back to the latest schema of every app


def test_a_tools_page_shows_the_name_its_server_gives_it(client):
    make_tool("gen_tool_0001", source=Tool.Source.BUILTIN)
    sync_server(generated("gen", 1))
    client.force_login(make_user(username="viewer", role="viewer"))

    page = client.get(reverse("tool-detail", args=["gen__gen_tool_0001"])).content.decode()

    assert "<dt>Name on its MCP server</dt><dd><code>gen_tool_0001</code></dd>" in page


@override_settings(TOOLHUB_MCP_MAX_TOOLS=1)
def test_a_failed_test_connection_leaves_no_server_process_running(client, tmp_path):
    marker = str(tmp_path / "tested")
    generated("gen", 3, "--malformed", marker)
    client.force_login(make_user(username="admin", role="admin"))

    page = client.post(reverse("mcp-server-test", args=["gen"])).content.decode()

    assert "Connection failed:" in page and "TOOLHUB_MCP_MAX_TOOLS" in page
    assert processes_with(marker) == []
