"""The policy simulation's warning: a draft that restricts a tool is sidestepped by permitted reads returning the
same data (issue 36's case: get_member_balance behind approval; get_member and get_points_ledger return the
balance too)."""

import json

import pytest
from django.contrib.auth import get_user_model

from agents.models import Conversation, Turn, TurnEvent
from catalog.models import ToolPolicy
from catalog.policies.decision import load_catalog
from catalog.policies.sidestep import recorded_results, restricts, sidesteps
from catalog.policies.versions import snapshot
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db

MEMBER = {"type": "object", "properties": {"member_id": {"type": "string"}}, "required": ["member_id"]}
BALANCE = {
    "type": "object",
    "properties": {"member_id": {"type": "string"}, "expiring_within_days": {"type": "integer"}},
    "required": ["member_id"],
}


def loyalty():
    """A balance tool, two reads that return the balance under other names, a read that does not, a write that does
    and a read behind approval that does."""
    balance = make_policy(make_tool("get_member_balance", input_schema=BALANCE,
                                    description="Get a member's available, pending and soon-to-expire points."),
                          domains=("loyalty",))  # fmt: skip
    summary = "Get one member's profile, tier and points summary."
    make_policy(make_tool("get_member", input_schema=MEMBER, description=summary), domains=("loyalty",))
    make_policy(make_tool("get_points_ledger", input_schema=MEMBER,
                          description="List a member's points entries with the running balance, newest first."),
                operation="list", domains=("loyalty",))  # fmt: skip
    make_policy(make_tool("list_vouchers", input_schema=MEMBER, description="List a member's vouchers."),
                operation="list", domains=("loyalty",))  # fmt: skip
    make_policy(make_tool("adjust_points", input_schema=MEMBER, description="Correct a member's balance."),
                operation="update", risk="medium", domains=("loyalty",))  # fmt: skip
    make_policy(make_tool("export_members", input_schema=MEMBER, description="Export members with their balance."),
                requires_confirmation=True, domains=("loyalty",))  # fmt: skip
    return balance


def record_results(results: dict[str, dict]) -> None:
    owner = get_user_model().objects.create_user("caller", password="a-long-test-password")
    turn = Turn.objects.create(conversation=Conversation.objects.create(owner=owner, title="t"))
    for sequence, (tool, result) in enumerate(results.items(), start=1):
        payload = {"tool_name": tool, "content": json.dumps(result), "is_error": False}
        TurnEvent.objects.create(turn=turn, sequence=sequence, type=TurnEvent.Type.TOOL_RESULT, phase="tool",
                                 payload=payload)  # fmt: skip


def test_only_a_draft_that_holds_calls_back_restricts():
    active = {"status": "active", "requires_confirmation": False}
    assert not restricts(active)
    assert restricts(active | {"requires_confirmation": True})
    assert restricts(active | {"status": "rejected"}) and restricts(active | {"status": "draft"})


def test_recorded_results_name_the_reads_returning_the_balance_with_their_fields():
    policy = loyalty()
    record_results({
        "get_member_balance": {"member_id": "mem_1", "available": 1250, "pending": 0, "expiring": 100},
        "get_member": {"member_id": "mem_1", "tier": "gold", "points_balance": 1250, "consents": {"email": True}},
        "get_points_ledger": {"items": [{"entry_id": "e1", "points": 50, "running_balance": 1250}]},
        "list_vouchers": {"items": [{"voucher_id": "v1", "status": "issued"}]},
        "adjust_points": {"balance": 1250},
        "export_members": {"rows": [{"member_id": "mem_1", "balance": 1250}]},
    })  # fmt: skip
    found = sidesteps("get_member_balance", snapshot(policy) | {"requires_confirmation": True}, load_catalog())
    assert [(s.tool, s.matched, s.evidence) for s in found] == [
        ("get_member", ("points_balance",), "recorded results"),
        ("get_points_ledger", ("running_balance",), "recorded results"),
    ]  # not the vouchers (no shared field), the write, nor the read that itself waits for approval


def test_the_member_id_it_is_asked_about_is_not_what_it_guards():
    policy = loyalty()
    record_results({"get_member_balance": {"member_id": "mem_1", "available": 3}, "list_vouchers": {"member_id": "m"}})
    found = sidesteps("get_member_balance", snapshot(policy) | {"status": ToolPolicy.Status.REJECTED}, load_catalog())
    assert "list_vouchers" not in [s.tool for s in found]


def test_without_recorded_results_an_output_schema_or_the_description_is_the_evidence():
    policy = loyalty()
    ledger = make_tool("get_member_summary", input_schema=MEMBER, description="A member in one line.",
                       output_schema={"type": "object", "properties": {"points": {"type": "object", "properties": {
                           "balance": {"type": "integer"}}}}})  # fmt: skip
    make_policy(ledger, domains=("loyalty",))
    found = sidesteps("get_member_balance", snapshot(policy) | {"requires_confirmation": True}, load_catalog())
    assert [(s.tool, s.matched, s.evidence) for s in found] == [
        ("get_member_summary", ("balance",), "output schema"),
        ("get_points_ledger", ("balance",), "description"),
    ]  # get_member's description says "points summary", not balance: no warning without evidence


def test_a_draft_that_restricts_nothing_or_a_tool_with_no_terms_warns_of_nothing():
    policy = loyalty()
    assert sidesteps("get_member_balance", snapshot(policy), load_catalog()) == []
    assert sidesteps("gone", {"status": "rejected", "requires_confirmation": False}, load_catalog()) == []
    assert recorded_results(["get_member"]) == {}


def test_the_simulation_page_shows_the_warning_with_links(client):
    policy = loyalty()
    record_results({"get_member": {"member_id": "mem_1", "points_balance": 10}})
    client.force_login(make_user("op", role="operator"))
    draft = {"status": "active", "operation": "read", "risk": "medium", "domains": ["loyalty"],
             "requires_confirmation": "on", "replay": "5", "aliases": "", "workflow_phases": "",
             "base_version": policy.version}  # fmt: skip
    page = client.post("/policies/get_member_balance/simulate", draft, headers={"HX-Request": "true"})
    html = page.content.decode()
    assert page.status_code == 200, html
    assert "Other tools return the same data" in html and "puts get_member_balance behind approval" in html
    assert 'href="/policies/get_member/"' in html and "<code>points_balance</code>" in html
    assert 'href="/policies/get_points_ledger/"' in html  # from its description
    draft.pop("requires_confirmation")
    assert (
        "Other tools return the same data"
        not in client.post(
            "/policies/get_member_balance/simulate", draft, headers={"HX-Request": "true"}
        ).content.decode()
    )


def test_a_word_most_of_the_catalog_uses_is_no_evidence():
    """ "points" in a loyalty catalog: every tool mentions it, so sharing it says nothing."""
    ledger = make_policy(make_tool("get_points_ledger", input_schema=MEMBER, description="A member's ledger."),
                         operation="list", domains=("loyalty",))  # fmt: skip
    for number in range(12):
        make_policy(make_tool(f"report_{number}", description=f"Campaign report {number}: points awarded."),
                    domains=("loyalty",))  # fmt: skip
    make_policy(make_tool("get_points_transaction", description="One ledger entry."), domains=("loyalty",))
    found = sidesteps("get_points_ledger", snapshot(ledger) | {"requires_confirmation": True}, load_catalog())
    assert [(s.tool, s.matched) for s in found] == [("get_points_transaction", ("ledger",))]
