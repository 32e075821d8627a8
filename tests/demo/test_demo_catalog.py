"""The demo catalog: big enough to matter, realistic schemas, fail-closed examples, idempotent."""

import statistics

import pytest
from django.core.management import call_command

from agents.models import ModelProfile
from catalog.knowledge.selectors import stale_snippets
from catalog.models import KnowledgeSnippet, PolicyVersion, Tool, ToolPolicy
from catalog.policies.selectors import tools_needing_policy
from demo.catalog import load_demo_catalog

SEED_TOOLS = [
    "calculate", "get_current_time", "get_current_date", "web_search", "dns_lookup",
    "list_containers", "inspect_container", "start_container", "stop_container", "restart_container",
    "get_service_status", "restart_service",
]  # fmt: skip
ENTITIES = {
    "campaign": "campaigns", "rule": "rules", "reward": "rewards", "member": "members",
    "tier": "tiers", "voucher": "vouchers", "points_transaction": "points_transactions",
}  # fmt: skip


@pytest.fixture
def demo(db):
    return load_demo_catalog()


def test_demo_catalog_has_the_seed_tools_and_at_least_90(demo):
    names = set(Tool.objects.values_list("name", flat=True))
    assert len(names) >= 90
    assert set(SEED_TOOLS) <= names


def test_loyalty_domain_is_80_plus_mcp_tools_covering_every_entity_and_verb(demo):
    loyalty = Tool.objects.filter(source=Tool.Source.MCP)
    assert loyalty.count() >= 80
    assert all(tool.is_mcp for tool in loyalty)
    names = set(loyalty.values_list("name", flat=True))
    for singular, plural in ENTITIES.items():
        expected = {f"list_{plural}", f"get_{singular}", f"search_{plural}"}
        expected |= {f"{verb}_{singular}" for verb in ("create", "update", "delete")}
        assert expected <= names, expected - names
    assert {"create_rule_draft", "set_rule_formula", "set_rule_criteria", "submit_rule"} <= names


def test_rule_schemas_are_deep_and_large(demo):
    create_rule = Tool.objects.get(name="create_rule")
    formula = create_rule.input_schema["properties"]["formula"]
    assert len(formula["oneOf"]) == 8
    assert {"all_of"} <= set(create_rule.input_schema["properties"]["criteria"]["properties"])
    assert Tool.objects.get(name="update_rule").schema_tokens >= 1000
    assert create_rule.schema_tokens >= 1000
    writes = Tool.objects.filter(source=Tool.Source.MCP, policy__operation__in=["create", "update"])
    assert statistics.median(writes.values_list("schema_tokens", flat=True)) >= 200


def test_some_tools_are_left_without_policy_so_fail_closed_is_visible(demo):
    unpolicied = set(Tool.objects.filter(policy__isnull=True).values_list("name", flat=True))
    assert unpolicied == {"purge_container_images", "export_member_data"}
    needing = set(tools_needing_policy().values_list("name", flat=True))
    assert unpolicied <= needing
    assert ToolPolicy.objects.filter(status=ToolPolicy.Status.ACTIVE).count() >= 85


def test_knowledge_has_owners_and_some_is_overdue(demo):
    assert KnowledgeSnippet.objects.count() >= 12
    assert not KnowledgeSnippet.objects.filter(owner="").exists()
    assert 1 <= len(stale_snippets()) < KnowledgeSnippet.objects.count()


def test_loading_twice_creates_nothing_new_and_keeps_operator_edits(demo):
    policy = ToolPolicy.objects.get(tool__name="calculate")
    policy.aliases = ["edited by an operator"]
    policy.save()
    counts = (Tool.objects.count(), ToolPolicy.objects.count(), PolicyVersion.objects.count())
    again = load_demo_catalog()
    assert (again.tools_created, again.policies_created, again.snippets_created) == (0, 0, 0)
    assert counts == (Tool.objects.count(), ToolPolicy.objects.count(), PolicyVersion.objects.count())
    assert ToolPolicy.objects.get(tool__name="calculate").aliases == ["edited by an operator"]


def test_setup_demo_creates_profiles_and_an_operator_once(db, tmp_path, settings, capsys):
    settings.DATA_DIR = tmp_path
    call_command("setup_demo")
    first = capsys.readouterr().out
    assert "username: operator" in first and "password: " in first
    call_command("setup_demo", "--port", "8101")  # make run PORT=8101
    second = capsys.readouterr().out
    assert first.split("password: ")[1].split()[0] == second.split("password: ")[1].split()[0]
    assert "Log in at http://127.0.0.1:8000/login/" in first and "Log in at http://127.0.0.1:8101/login/" in second
    assert "createsuperuser" in second
    assert set(ModelProfile.objects.values_list("name", "context_window")) == {("chat-8k", 8192), ("chat-32k", 32768)}


def test_every_demo_tool_passes_the_schema_token_gate(demo_catalog, settings):
    """The demo passes its own gate (catalog.W001): no tool's definition is over TOOLHUB_MAX_TOOL_SCHEMA_TOKENS."""
    from catalog.policies.checks import tool_schemas_fit_the_token_gate

    cap = settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS
    oversized = {t.name: t.schema_tokens for t in Tool.objects.filter(enabled=True) if t.schema_tokens > cap}
    assert oversized == {}
    assert tool_schemas_fit_the_token_gate(databases=["default"]) == []
    unsaved_rule = Tool.objects.get(name="simulate_rule").input_schema["properties"]["rule"]
    assert unsaved_rule["required"] == ["criteria", "formula"]
