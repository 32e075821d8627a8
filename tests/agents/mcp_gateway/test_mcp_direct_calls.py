"""A tool called by name over /mcp is decided by its policy, the caller's role and scopes and approvals, never by the
router's reading of a request; each refusal names the rule (agents.mcp_gateway.direct_calls, .call_approvals)."""

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

import agents.tasks  # noqa: F401  registered up front: two threads' first import of it races (agents.turns.dispatch)
from agents.access.api_keys import create_api_key
from agents.mcp_gateway import call_approvals
from agents.mcp_gateway.found_tools import found_tools
from agents.mcp_gateway.server import NEUTRAL, ApprovalNeeded, ToolRefused, call, session_tools
from agents.models import Message, ToolApproval, Turn, TurnEvent
from agents.turns.approvals import decide_approval
from catalog.policies.bundle import build_bundle
from catalog.policies.decision import current_catalog
from tests.support.builders import make_policy, make_tool, make_user
from tests.support.mcp_asgi import McpAsgiClient

ENTITIES = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def not_connected(outcome) -> bool:
    """The call got past every rule: these test tools have no MCP server to run on."""
    return outcome.is_error and "not connected to" in json.loads(outcome.content)["error"]


def refusal(name, arguments, key_id) -> str:
    with pytest.raises(ToolRefused) as refused:
        call(name, arguments, key_id)
    return str(refused.value)


def catalog():
    make_policy(make_tool("create_entities", input_schema=ENTITIES, should_defer=True), operation="create",
                domains=())  # fmt: skip
    make_policy(make_tool("draft_thing", should_defer=False), status="draft")
    make_policy(make_tool("rejected_thing", should_defer=False), status="rejected")
    make_policy(make_tool("disabled_thing", should_defer=False, enabled=False))
    make_policy(make_tool("risky_unconfirmed", should_defer=False), operation="delete", risk="high")
    make_policy(make_tool("step_thing", should_defer=False), operation="create", workflow_phases=["confirm"])
    make_policy(make_tool("drop_table", input_schema=ENTITIES, should_defer=True), operation="delete", risk="high",
                requires_confirmation=True, domains=())  # fmt: skip
    make_tool("unpolicied_thing", should_defer=False)


def operator_key(username="client", role="operator", scopes=None) -> tuple[int, str]:
    extra = {"scopes": scopes} if scopes is not None else {}
    api_key, secret = create_api_key(user=make_user(username=username, role=role), name="mcp", **extra)
    return api_key.pk, secret


@pytest.mark.django_db
def test_a_direct_write_call_runs_under_its_policy_though_the_router_reads_the_request_as_answer():
    catalog()
    key, _ = operator_key()
    denied = {tool.name: tool.reason for tool in build_bundle(NEUTRAL, current_catalog()).denied}
    assert denied["create_entities"] == "create tool, but the request is answer"  # the router's reading ...

    outcome = call("create_entities", {"name": "Ada"}, key)  # ... plays no part: no domain, no search first

    assert not_connected(outcome)
    assert "create_entities" not in {tool.name for tool in session_tools(found_tools(key))}  # listing unchanged


@pytest.mark.django_db
def test_a_direct_call_is_refused_naming_the_rule_that_refused_it():
    catalog()
    key, _ = operator_key()

    assert refusal("nope", {}, key) == "There is no tool named nope."
    assert "no active policy: it has no policy (fail closed)" in refusal("unpolicied_thing", {"q": "x"}, key)
    assert "no active policy: its policy is draft" in refusal("draft_thing", {"q": "x"}, key)
    assert "policy denies it: its policy was rejected" in refusal("rejected_thing", {"q": "x"}, key)
    assert "is disabled" in refusal("disabled_thing", {"q": "x"}, key)
    assert "policy denies it: risk high without requires_confirmation" in refusal("risky_unconfirmed", {"q": "x"}, key)
    assert "only in workflow phases confirm" in refusal("step_thing", {"q": "x"}, key)


@pytest.mark.django_db
def test_arguments_are_checked_before_an_approval_is_asked():
    catalog()
    key, _ = operator_key()

    outcome = call("drop_table", {}, key)

    assert outcome.is_error and "Missing required arguments: name" in json.loads(outcome.content)["error"]
    assert not ToolApproval.objects.exists()


@pytest.mark.django_db
def test_a_call_whose_policy_requires_confirmation_waits_for_an_approval_and_runs_only_when_approved():
    catalog()
    key, _ = operator_key()
    reviewer = make_user(username="reviewer", role="admin")

    with pytest.raises(ApprovalNeeded) as needed:
        call("drop_table", {"name": "users"}, key)

    approval = ToolApproval.objects.get(pk=needed.value.approval_id)
    assert (approval.status, approval.tool_name, approval.arguments) == ("pending", "drop_table", {"name": "users"})
    assert approval.turn.conversation.owner.username == "client"
    assert approval.turn.conversation.channel == "mcp" and approval.turn.conversation.api_key_id is not None
    assert approval.turn.status == Turn.Status.DONE  # never resumed by a worker: the waiting request runs it
    assert TurnEvent.objects.filter(turn=approval.turn, type=TurnEvent.Type.APPROVAL_REQUIRED).exists()
    assert "needs approval" in str(needed.value) and f"/v1/approvals/{approval.pk}" in str(needed.value)
    assert not Message.objects.filter(role=Message.Role.TOOL).exists()  # not run

    decide_approval(approval_id=approval.pk, user=reviewer, approve=True)
    outcome = call("drop_table", {"name": "users"}, key, approval_id=approval.pk)

    assert not_connected(outcome)  # past every rule: it ran (on a server these tests do not have)
    answer = Message.objects.get(role=Message.Role.TOOL, turn=approval.turn)
    assert answer.tool_call_id == approval.tool_call_id
    assert TurnEvent.objects.filter(turn=approval.turn, type=TurnEvent.Type.DONE).exists()
    assert "was already used" in refusal_with(approval.pk, key)  # one approval, one run


def refusal_with(approval_id, key, name="drop_table", arguments=None) -> str:
    with pytest.raises(ToolRefused) as refused:
        call(name, arguments or {"name": "users"}, key, approval_id=approval_id)
    return str(refused.value)


@pytest.mark.django_db
def test_a_denied_or_mismatched_approval_never_runs_the_call():
    catalog()
    key, _ = operator_key()
    other_key, _ = operator_key(username="other")
    reviewer = make_user(username="reviewer", role="admin")
    with pytest.raises(ApprovalNeeded) as needed:
        call("drop_table", {"name": "users"}, key)
    approval_id = needed.value.approval_id

    assert "still pending" in refusal_with(approval_id, key)
    decide_approval(approval_id=approval_id, user=reviewer, approve=True)
    assert "another call" in refusal_with(approval_id, key, arguments={"name": "orders"})
    assert "another call" in refusal_with(approval_id, other_key)
    with pytest.raises(ApprovalNeeded) as again:
        call("drop_table", {"name": "users"}, key)
    decide_approval(approval_id=again.value.approval_id, user=reviewer, approve=False, reason="not in production")
    assert "needs approval, and reviewer denied it" in refusal_with(again.value.approval_id, key)
    assert ": not in production); it was not run." in refusal_with(again.value.approval_id, key)


# --- through the ASGI endpoint: role, scopes, and a call that waits for its approval ---------------------------


async def call_over_mcp(endpoint, secret, name, arguments):
    client = McpAsgiClient(endpoint, secret)
    assert (await client.initialize()).status == 200
    return await client.call_tool(name, arguments)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_key_without_the_mcp_scope_or_a_viewer_is_refused_naming_what_it_lacks(mcp_endpoint):
    await sync_to_async(catalog)()
    _, read_only = await sync_to_async(operator_key)(scopes=["read"])
    _, viewer = await sync_to_async(operator_key)(username="viewer", role="viewer")

    scoped = await call_over_mcp(mcp_endpoint, read_only, "create_entities", {"name": "Ada"})
    role = await call_over_mcp(mcp_endpoint, viewer, "create_entities", {"name": "Ada"})

    assert scoped.status == 403 and "needs the scope mcp (it has read)" in scoped.error["message"]
    assert 'scope="mcp"' in scoped.headers["www-authenticate"]
    assert role.status == 403 and "viewer may not call a tool" in role.error["message"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_call_over_mcp_waits_for_the_operator_and_runs_once_approved(mcp_endpoint, monkeypatch, eager_celery):
    monkeypatch.setattr(call_approvals, "POLL_SECONDS", 0.05)
    await sync_to_async(catalog)()
    _, secret = await sync_to_async(operator_key)()
    reviewer = await sync_to_async(make_user)(username="reviewer", role="admin")
    calling = asyncio.ensure_future(call_over_mcp(mcp_endpoint, secret, "drop_table", {"name": "users"}))

    approval = None
    for _ in range(200):
        approval = await sync_to_async(ToolApproval.objects.filter(status="pending").first)()
        if approval is not None:
            break
        await asyncio.sleep(0.05)
    assert approval is not None and not calling.done()
    # The decision wakes the turn's worker (eagerly here): it must leave the call to the waiting request.
    await sync_to_async(decide_approval)(approval_id=approval.pk, user=reviewer, approve=True)
    reply = await asyncio.wait_for(calling, timeout=10)

    assert reply.status == 200 and reply.result["isError"] and "not connected to" in reply.result["content"][0]["text"]
    turn = await sync_to_async(Turn.objects.get)(pk=approval.turn_id)
    assert turn.status == Turn.Status.DONE and not turn.error
    assert await sync_to_async(Message.objects.filter(turn=turn, role="tool").count)() == 1


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_call_over_mcp_that_is_denied_is_an_error_naming_the_decision(mcp_endpoint, monkeypatch):
    monkeypatch.setattr(call_approvals, "POLL_SECONDS", 0.05)
    await sync_to_async(catalog)()
    _, secret = await sync_to_async(operator_key)()
    reviewer = await sync_to_async(make_user)(username="reviewer", role="admin")
    calling = asyncio.ensure_future(call_over_mcp(mcp_endpoint, secret, "drop_table", {"name": "users"}))
    approval = None
    for _ in range(200):
        approval = await sync_to_async(ToolApproval.objects.filter(status="pending").first)()
        if approval is not None:
            break
        await asyncio.sleep(0.05)

    await sync_to_async(decide_approval)(approval_id=approval.pk, user=reviewer, approve=False)
    reply = await asyncio.wait_for(calling, timeout=10)

    assert "needs approval, and reviewer denied it" in reply.error["message"]
