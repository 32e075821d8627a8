"""The builtin offline model: arguments read by the tool's schema (never invented), questions for missing values,
follow-ups, and answers (a tool's result stands alone; without one, the knowledge base answers)."""

import datetime
import json
import sys

import pytest
from django.utils import timezone

from agents.models import Conversation, Message, ToolApproval, Turn, Workflow
from agents.providers import TurnHints
from agents.providers.builtin.arguments import Request, fill_arguments
from agents.providers.builtin.model import BuiltinProvider
from agents.turns import runtime
from agents.turns.start import create_turn
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer
from tests.support.builders import make_user

SNIPPET = {"title": "Time zones", "text": "Stores run on Asia/Ho_Chi_Minh.", "source": "wiki/tz"}


def answer(messages, hints) -> str:
    return "".join(chunk.content or "" for chunk in BuiltinProvider().stream(messages, [], hints=hints))


def test_a_tool_result_is_answered_without_pasting_knowledge():
    messages = [
        {"role": "user", "content": "What is 15 + 27?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "calculate", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"expression": "15 + 27", "result": 42})},
    ]
    text = answer(messages, TurnHints(user_text="What is 15 + 27?", knowledge=(SNIPPET,)))
    assert "42" in text and "Asia/Ho_Chi_Minh" not in text


def test_without_a_tool_result_the_knowledge_answers():
    messages = [{"role": "user", "content": "which time zone do stores use"}]
    text = answer(messages, TurnHints(user_text="which time zone do stores use", knowledge=(SNIPPET,)))
    assert "Stores run on Asia/Ho_Chi_Minh. (source: wiki/tz)" in text


# --- arguments read by the tool's schema ------------------------------------------------------------------

MEMBER_ID = {"type": "string", "description": "The member id, e.g. mem_8f3k2m9q.", "pattern": "^mem_[a-z0-9]{8,}$"}
REASON = {"type": "string", "minLength": 5}
AWARD = {"type": "object", "required": ["member_id", "points", "reason"], "properties": {
    "member_id": MEMBER_ID, "points": {"type": "integer", "minimum": 1}, "reason": REASON,
    "campaign_id": {"type": "string", "pattern": "^cmp_[a-z0-9]{8,}$"}}}  # fmt: skip
BALANCE = {"type": "object", "required": ["member_id"], "properties": {"member_id": MEMBER_ID}}


def fill(parameters, *texts, known=None):
    filled = fill_arguments(parameters, Request(texts, known or {}))
    return filled.arguments, filled.missing


def test_ids_are_read_by_their_pattern_and_a_number_and_a_reason_beside_them():
    assert fill(AWARD, "award 150 points to mem_lan00001 for the spring survey") == (
        {"member_id": "mem_lan00001", "points": 150, "reason": "the spring survey"},
        [],
    )


def test_an_id_of_another_form_is_not_taken_for_the_patterned_one():
    assert fill(AWARD, "award 150 points to member M-55 for the survey") == (
        {"points": 150, "reason": "the survey"},
        ["member_id"],
    )


def test_an_id_without_a_pattern_is_read_by_its_examples_prefix_or_by_the_word_naming_it():
    by_example = {"type": "object", "required": ["voucher_id"], "properties": {
        "voucher_id": {"type": "string", "description": "Voucher id, e.g. V-100."}}}  # fmt: skip
    assert fill(by_example, "void V-204 please") == ({"voucher_id": "V-204"}, [])
    by_word = {"type": "object", "required": ["member_id"], "properties": {"member_id": {"type": "string"}}}
    assert fill(by_word, "Show me member 42's points balance") == ({"member_id": "42"}, [])


def test_amounts_in_words_and_units_and_the_sign_a_removal_gives():
    amount = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}
    assert fill(amount, "five hundred") == ({"amount": 500}, [])
    assert fill(amount, "a budget of 2 million") == ({"amount": 2000000}, [])
    assert fill(amount, "split 1,250,000 VND") == ({"amount": 1250000}, [])
    delta = {"type": "object", "required": ["delta"], "properties": {"delta": {"type": "integer", "minimum": -100}}}
    assert fill(delta, "remove 20 points") == ({"delta": -20}, [])


def test_several_numbers_are_not_guessed_between_unless_one_sits_by_the_fields_name():
    points = {"type": "object", "required": ["points"], "properties": {"points": {"type": "integer"}}}
    assert fill(points, "give 3 members 50 points") == ({"points": 50}, [])
    assert fill(points, "between 3 and 50") == ({}, ["points"])


def test_enum_values_by_name_dates_relative_and_iso_and_a_quoted_name():
    schema = {"type": "object", "required": ["kind", "day", "name"], "properties": {
        "kind": {"type": "string", "enum": ["mobile_app", "web"]}, "day": {"type": "string", "format": "date"},
        "name": {"type": "string", "minLength": 3}}}  # fmt: skip
    arguments, missing = fill(schema, 'a campaign "Summer splash" on the mobile app from tomorrow')
    tomorrow = (timezone.localdate() + datetime.timedelta(days=1)).isoformat()
    assert (arguments, missing) == ({"kind": "mobile_app", "day": tomorrow, "name": "Summer splash"}, [])
    assert fill(schema, "on 2026-05-01 for web")[0]["day"] == "2026-05-01"


def test_a_nested_object_is_filled_or_its_missing_field_named_by_path():
    money = {"type": "object", "required": ["total"], "properties": {"total": {"type": "object", "required": [
        "amount", "currency"], "properties": {"amount": {"type": "number"}, "currency": {
            "type": "string", "pattern": "^[A-Z]{3}$"}}}}}  # fmt: skip
    assert fill(money, "an order of 250,000 VND") == ({"total": {"amount": 250000, "currency": "VND"}}, [])
    assert fill(money, "an order of 250,000") == ({}, ["total.currency"])


def test_nothing_the_request_does_not_state_is_invented():
    assert fill(AWARD, "give some points") == ({}, ["member_id", "points", "reason"])


def test_an_earlier_message_and_a_workflows_ids_supply_values():
    assert fill(AWARD, "award 150 points for the survey", "mem_lan00001")[1] == []
    draft = {"type": "object", "required": ["draft_id"], "properties": {"draft_id": {"type": "string"}}}
    assert fill(draft, "go on", known={"draft_id": "drf_12345678"}) == ({"draft_id": "drf_12345678"}, [])


# --- the model's steps -----------------------------------------------------------------------------------


def tool(name, parameters):
    return {"type": "function", "function": {"name": name, "description": name, "parameters": parameters}}


def step(messages, tools, **hints):
    text = hints.pop("user_text", next(m["content"] for m in reversed(messages) if m["role"] == "user"))
    return list(BuiltinProvider().stream(messages, tools, hints=TurnHints(user_text=text, **hints)))


def test_the_recommended_tool_is_called_with_what_the_request_states():
    (chunk,) = step([{"role": "user", "content": "balance of mem_lan00001?"}], [tool("get_member_balance", BALANCE)],
                    recommended_tools=("get_member_balance",))  # fmt: skip
    (call,) = chunk.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_member_balance", {"member_id": "mem_lan00001"})


def test_a_missing_value_is_asked_for_by_name_and_nothing_is_called():
    chunks = step([{"role": "user", "content": "show member M-300's balance"}], [tool("get_member_balance", BALANCE)],
                  recommended_tools=("get_member_balance",))  # fmt: skip
    assert not any(chunk.tool_calls for chunk in chunks)
    text = "".join(chunk.content for chunk in chunks)
    assert text == ("To call get_member_balance I need member_id: what is the member_id "
                    "(The member id, e.g. mem_8f3k2m9q)?")  # fmt: skip


def test_a_reply_to_the_question_continues_the_request_it_answers():
    messages = [
        {"role": "user", "content": "award 150 points for the survey"},
        {"role": "assistant", "content": "To call award_points I need member_id: what is the member_id?"},
        {"role": "user", "content": "mem_minh0001"},
    ]
    (chunk,) = step(messages, [tool("award_points", AWARD)], recommended_tools=("award_points",))
    assert json.loads(chunk.tool_calls[0].arguments) == {"member_id": "mem_minh0001", "points": 150,
                                                         "reason": "the survey"}  # fmt: skip


def test_a_new_request_after_an_answer_does_not_reuse_the_old_ones_values():
    messages = [
        {"role": "user", "content": "balance of mem_lan00001"},
        {"role": "assistant", "content": "get_member_balance returned balance 5700."},
        {"role": "user", "content": "and the balance of the other member"},
    ]
    chunks = step(messages, [tool("get_member_balance", BALANCE)], recommended_tools=("get_member_balance",))
    assert not any(chunk.tool_calls for chunk in chunks)


def test_only_the_first_recommendation_and_reads_that_name_their_values_are_called():
    tools = [tool("deduct_points", AWARD), tool("award_points", AWARD), tool("get_member_balance", BALANCE)]
    (chunk,) = step([{"role": "user", "content": "take 20 points from mem_lan00001, order returned"}], tools,
                    recommended_tools=("deduct_points", "award_points", "get_member_balance"),
                    read_only_tools=frozenset({"get_member_balance"}))  # fmt: skip
    assert [call.name for call in chunk.tool_calls] == ["deduct_points", "get_member_balance"]


def test_a_result_is_summarised_in_a_sentence():
    messages = [
        {"role": "user", "content": "list campaigns"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "list_campaigns", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"items": [
            {"campaign_id": "cmp_tet2026a", "name": "Tết double points", "status": "active"}], "total": 1})},
    ]  # fmt: skip
    text = answer(messages, TurnHints(user_text="list campaigns"))
    assert text == "list_campaigns found 1 item: Tết double points (cmp_tet2026a, active)."


# --- full turns with the builtin model -----------------------------------------------------------------------


@pytest.fixture
def builtin_conversation(demo_catalog, counted_embedder, settings):
    settings.TOOLHUB_MODEL_PROVIDER = "builtin"
    return Conversation.objects.create(owner=make_user())


def run(conversation, text) -> Turn:
    turn = create_turn(conversation, text)
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def final_answer(turn) -> str:
    return Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).exclude(content="").last().content


@pytest.mark.django_db
def test_a_risky_tool_called_by_the_builtin_model_waits_on_the_approval_screen(builtin_conversation):
    turn = run(builtin_conversation, "restart the web container")
    assert turn.status == Turn.Status.WAITING
    approval = ToolApproval.objects.get(turn=turn)
    assert (approval.tool_name, approval.arguments) == ("restart_container", {"container": "web"})


@pytest.mark.django_db
def test_a_turn_asks_then_the_reply_runs_the_tool_it_asked_about(builtin_conversation):
    first = run(builtin_conversation, "how many points does the member have")
    assert "member_id" in final_answer(first) and final_answer(first).endswith("?")
    assert not Message.objects.filter(turn=first).exclude(tool_calls=[]).exists()
    second = run(builtin_conversation, "mem_lan00001")
    calls = [c for m in Message.objects.filter(turn=second) for c in m.tool_calls]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_member_balance", {"member_id": "mem_lan00001"})
    ]


@pytest.mark.django_db
def test_the_staged_rule_flow_is_walked_with_the_builtin_model_up_to_its_approval(builtin_conversation, tmp_path):
    server = McpServer.objects.create(
        name="loyalty", command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(tmp_path / "loyalty.sqlite3")],
    )  # fmt: skip
    assert sync_server(server).ok
    run(builtin_conversation, "Create a rule for campaign cmp_bday0001 named 'Birthday triple points'")
    workflow = Workflow.objects.get(conversation=builtin_conversation)
    assert workflow.phase == "rule_formula" and workflow.state["ids"]["draft_id"].startswith("drf_")
    chose = run(builtin_conversation, "multiplier")
    assert final_answer(chose).endswith("what is the formula.factor (a number above 1 up to 10)?")
    run(builtin_conversation, "factor 3")
    run(builtin_conversation, "birthday_month = 5")
    assert Workflow.objects.get(pk=workflow.pk).phase == "rule_submit"
    submit = run(builtin_conversation, "submit the rule")
    assert submit.status == Turn.Status.WAITING
    assert ToolApproval.objects.get(turn=submit).tool_name == "submit_rule"
