"""The catalog page: filters (domain, source, risk, loading, policy), sort, schema tokens, needs-policy first."""

import pytest

from catalog.models import Tool
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db

LONG_SCHEMA = {
    "type": "object",
    "properties": {f"field_{i}": {"type": "string", "description": f"The field number {i}."} for i in range(12)},
}


@pytest.fixture
def tools():
    make_policy(make_tool("get_weather"), domains=("weather",))
    make_policy(make_tool("list_vouchers", is_mcp=True, source="mcp", input_schema=LONG_SCHEMA),
                domains=("loyalty",), risk="medium")  # fmt: skip
    make_policy(make_tool("delete_member", is_mcp=True, source="mcp"), domains=("loyalty",), operation="delete",
                risk="high", requires_confirmation=True, status="draft")  # fmt: skip
    make_tool("rogue_tool")


def table_names(client, **params) -> list[str]:
    table = client.get("/catalog/", params).content.decode().split('id="tool-table"')[1]
    return [name for name in ("delete_member", "get_weather", "list_vouchers", "rogue_tool") if f">{name}<" in table]


@pytest.fixture
def viewer_client(client):
    client.force_login(make_user("watcher", role="viewer"))
    return client


def test_filters_by_domain_source_risk_loading_and_policy(viewer_client, tools):
    assert table_names(viewer_client, domain="loyalty") == ["delete_member", "list_vouchers"]
    assert table_names(viewer_client, source="builtin") == ["get_weather", "rogue_tool"]
    assert table_names(viewer_client, risk="high") == ["delete_member"]
    assert table_names(viewer_client, deferred="yes") == ["delete_member", "list_vouchers"]
    assert table_names(viewer_client, deferred="no") == ["get_weather", "rogue_tool"]
    assert table_names(viewer_client, policy="draft") == ["delete_member"]
    assert table_names(viewer_client, policy="none") == ["rogue_tool"]
    assert table_names(viewer_client, domain="loyalty", risk="medium") == ["list_vouchers"]
    assert len(table_names(viewer_client, risk="bogus", domain="nowhere")) == 4  # invalid filters are ignored


def test_sort_by_schema_tokens_and_each_row_shows_its_tokens(viewer_client, tools):
    page = viewer_client.get("/catalog/", {"sort": "-tokens"}).content.decode().split('id="tool-table"')[1]
    by_tokens = list(Tool.objects.order_by("-schema_tokens", "name").values_list("name", "schema_tokens"))
    positions = [page.index(f">{name}<") for name, _ in by_tokens]
    assert positions == sorted(positions) and by_tokens[0][0] == "list_vouchers"
    for name, tokens in by_tokens:
        row = page.split(f">{name}<")[1].split("</tr>")[0]
        assert f'<td class="num">{tokens}</td>' in row


def test_needs_policy_list_comes_before_the_table_and_links_to_the_editor(viewer_client, tools):
    page = viewer_client.get("/catalog/").content.decode()
    needs = page.split('id="needs-policy"')[1].split("</section>")[0]
    assert "rogue_tool" in needs and "delete_member" in needs and "get_weather" not in needs
    assert 'href="/policies/rogue_tool/"' in needs
    assert page.index('id="needs-policy"') < page.index('id="tool-table"')


def test_filter_form_keeps_the_query_in_the_fields(viewer_client, tools):
    page = viewer_client.get("/catalog/", {"q": "vouch", "domain": "loyalty", "sort": "-tokens"}).content.decode()
    assert 'value="vouch"' in page
    assert '<option value="loyalty" selected>' in page and '<option value="-tokens" selected>' in page
    assert table_names(viewer_client, q="vouch") == ["list_vouchers"]


def test_tool_detail_shows_schema_tokens_policy_and_links_the_editor(viewer_client, tools):
    page = viewer_client.get("/catalog/list_vouchers/").content.decode()
    assert "field_11" in page and "deferred behind tool search" in page and 'href="/policies/list_vouchers/"' in page
