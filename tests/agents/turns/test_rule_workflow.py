"""The demo's staged rule creation runs as a Workflow through real turns (scripted model, demo MCP server)."""

import json
import sys

import pytest

from agents.models import Conversation, Message, RoutingLog, ToolApproval, Turn, TurnEvent, Workflow
from agents.turns import runtime
from agents.turns.approvals import decide_approval
from agents.turns.staged_flows import returned_ids
from agents.turns.start import create_turn
from agents.turns.workflows import advance_workflow
from catalog.mcp_client.client import call_tool
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer
from catalog.policies.decision import RoutingDecision
from catalog.policies.flows import flow_to_start
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db

CREATE = "Create a rule for campaign cmp_bday0001 named Birthday triple points"
CRITERIA = {"all_of": [{"any_of": [{"field": "birthday_month", "operator": "eq", "value": 5}]}]}


@pytest.fixture
def loyalty(tmp_path, demo_catalog):
    server = McpServer.objects.create(
        name="loyalty", command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(tmp_path / "loyalty.sqlite3")],
    )  # fmt: skip
    assert sync_server(server).ok
    return server


@pytest.fixture
def conversation(loyalty):
    return Conversation.objects.create(owner=make_user())


def run(conversation, text) -> Turn:
    turn = create_turn(conversation, text)
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def call(tool, /, **arguments) -> dict:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def tools_offered(request) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def tool_results(turn) -> list[dict]:
    return [json.loads(m.content) for m in Message.objects.filter(turn=turn, role=Message.Role.TOOL).order_by("id")]


def workflow_of(conversation) -> Workflow:
    return Workflow.objects.get(conversation=conversation)


def test_a_confident_create_rule_request_starts_the_workflow_with_only_the_draft_step(conversation, scripted_model):
    scripted_model.steps = [{"content": "Which priority should the rule have?"}]
    turn = run(conversation, CREATE)

    workflow = workflow_of(conversation)
    assert (workflow.kind, workflow.phase, workflow.version) == ("loyalty_rule", "rule_draft", 1)
    assert workflow.status == Workflow.Status.ACTIVE
    offered = tools_offered(scripted_model.requests[0])
    assert {"create_rule_draft", "get_rule_draft"} <= offered
    assert "create_rule" not in offered, "the one-shot giant schema never loads while the flow runs"
    assert "set_rule_formula" not in offered and "submit_rule" not in offered
    assert RoutingLog.objects.get(turn=turn).decision["phase"] == "rule_draft"


def test_a_request_that_is_not_a_confident_create_starts_no_workflow():
    confident = RoutingDecision("create", frozenset({"loyalty"}), 1.0)
    assert flow_to_start(confident, ("create_rule",)).kind == "loyalty_rule"
    assert flow_to_start(RoutingDecision("create", frozenset({"loyalty"}), 0.4), ("create_rule",)) is None
    assert flow_to_start(RoutingDecision("list", frozenset({"loyalty"}), 0.9), ("create_rule",)) is None
    assert flow_to_start(confident, ("create_campaign",)) is None


def test_each_step_advances_the_workflow_and_the_next_step_shows_only_its_own_tools(conversation, scripted_model):
    scripted_model.steps = [
        call("create_rule_draft", campaign_id="cmp_bday0001", name="Birthday triple points"),
        {"content": "Draft opened. Which formula type?"},
    ]
    run(conversation, CREATE)
    workflow = workflow_of(conversation)
    assert (workflow.phase, workflow.version) == ("rule_formula", 2)
    draft_id = workflow.state["ids"]["draft_id"]
    assert draft_id.startswith("drf_")
    # Within the same turn the model's next step already sees the formula step, type only.
    second = scripted_model.requests[1]
    assert "set_rule_formula" in tools_offered(second) and "create_rule_draft" not in tools_offered(second)
    formula = next(t for t in second["tools"] if t["function"]["name"] == "set_rule_formula")
    assert set(formula["function"]["parameters"]["properties"]["formula"]["properties"]) == {"type"}


def test_the_formula_type_is_chosen_first_then_only_its_fields_are_asked(conversation, scripted_model):
    scripted_model.steps = [
        call("create_rule_draft", campaign_id="cmp_bday0001", name="Birthday triple points"),
        {"content": "Which formula type?"},
    ]
    run(conversation, CREATE)
    draft_id = workflow_of(conversation).state["ids"]["draft_id"]
    scripted_model.requests.clear()
    scripted_model.steps = [
        call("set_rule_formula", draft_id=draft_id, formula={"type": "multiplier"}),
        call("set_rule_formula", draft_id=draft_id, formula={"type": "multiplier"}),  # fields missing
        {"content": "By which factor should points be multiplied?"},
    ]
    turn = run(conversation, "Use a multiplier")

    chosen, missing = tool_results(turn)
    assert chosen["chosen"] == {"formula": "multiplier"}
    assert "factor" in missing["error"], "a missing field is refused and asked for, never invented"
    workflow = workflow_of(conversation)
    assert (workflow.phase, workflow.state["choices"]) == ("rule_formula", {"formula": "multiplier"})
    narrowed = next(t for t in scripted_model.requests[1]["tools"] if t["function"]["name"] == "set_rule_formula")
    assert "factor" in narrowed["function"]["parameters"]["properties"]["formula"]["properties"]


def test_the_whole_flow_ends_with_one_submitted_rule_after_approval(conversation, scripted_model, loyalty):
    scripted_model.steps = [
        call("create_rule_draft", campaign_id="cmp_bday0001", name="Birthday triple points"),
        {"content": "Which formula type?"},
    ]
    run(conversation, CREATE)
    draft_id = workflow_of(conversation).state["ids"]["draft_id"]
    scripted_model.steps = [
        call("set_rule_formula", draft_id=draft_id, formula={"type": "multiplier"}),
        call("set_rule_formula", draft_id=draft_id, formula={"type": "multiplier", "factor": 3}),
        call("set_rule_criteria", draft_id=draft_id, criteria=CRITERIA),
        call("submit_rule", draft_id=draft_id, activate=True),
    ]
    turn = run(conversation, "Triple points on the member's birthday month, then save it")
    assert turn.status == Turn.Status.WAITING, "submit_rule requires confirmation"
    assert workflow_of(conversation).phase == "rule_submit"

    scripted_model.steps = [{"content": "The rule is saved and active."}]
    approval = ToolApproval.objects.get(turn=turn)
    decide_approval(approval_id=approval.pk, user=make_user("boss", role="admin"), approve=True)
    runtime.run_turn(turn.id)
    turn.refresh_from_db()

    assert turn.status == Turn.Status.DONE
    workflow = workflow_of(conversation)
    assert workflow.status == Workflow.Status.SUBMITTED
    assert workflow.idempotency_key == f"loyalty_rule-{workflow.pk}"
    rule = json.loads(workflow.result["content"])
    assert rule["rule_id"].startswith("rul_") and rule["status"] == "active"
    rules = json.loads(call_tool(loyalty, "list_campaign_rules", {"campaign_id": "cmp_bday0001"}).content)["items"]
    assert [r["rule_id"] for r in rules] == [rule["rule_id"]]


def test_a_submit_that_fails_keeps_the_workflow_active_at_the_submit_step(conversation, scripted_model):
    scripted_model.steps = [
        call("create_rule_draft", campaign_id="cmp_bday0001", name="Birthday triple points"),
        {"content": "Which formula type?"},
    ]
    run(conversation, CREATE)
    workflow = workflow_of(conversation)
    # Skip to the submit step with the formula and criteria still unset on the server.
    advance_workflow(workflow_id=workflow.pk, expected_version=workflow.version, phase="rule_submit")
    scripted_model.steps = [call("submit_rule", draft_id=workflow.state["ids"]["draft_id"])]
    turn = run(conversation, "save it")
    scripted_model.steps = [{"content": "The draft still misses its formula and criteria."}]
    decide_approval(
        approval_id=ToolApproval.objects.get(turn=turn).pk, user=make_user("boss", role="admin"), approve=True
    )
    runtime.run_turn(turn.id)

    (result,) = tool_results(turn)
    assert "missing: formula" in result["error"]
    workflow.refresh_from_db()
    assert (workflow.status, workflow.phase, workflow.idempotency_key) == ("active", "rule_submit", "")


def test_a_step_racing_another_writer_is_refused_and_the_user_is_asked_to_retry(conversation, scripted_model):
    scripted_model.steps = [{"content": "Which priority?"}]
    run(conversation, CREATE)
    workflow = workflow_of(conversation)
    scripted_model.steps = [
        call("create_rule_draft", campaign_id="cmp_bday0001", name="Birthday triple points"),
        {"content": "Sorry, please retry."},
    ]

    original = runtime.staged_flows.advance_after

    def another_writer_first(step, stale, content):
        advance_workflow(workflow_id=stale.pk, expected_version=stale.version, state_changes={"note": "other tab"})
        return original(step, stale, content)

    runtime.staged_flows.advance_after = another_writer_first
    try:
        turn = run(conversation, "priority 10")
    finally:
        runtime.staged_flows.advance_after = original

    (result,) = tool_results(turn)
    assert "is at version 2, not 1" in result["error"]
    conflict = TurnEvent.objects.get(turn=turn, phase="workflow_conflict")
    assert "send your last message again" in conflict.payload["message"]
    workflow.refresh_from_db()
    assert (workflow.phase, workflow.version, workflow.state["note"]) == ("rule_draft", 2, "other tab")


def test_returned_ids_keeps_only_top_level_id_strings():
    assert returned_ids('{"draft_id": "drf_1", "missing": ["formula"], "count_id": 3}') == {"draft_id": "drf_1"}
    assert returned_ids("not json") == {} and returned_ids("[1]") == {}
