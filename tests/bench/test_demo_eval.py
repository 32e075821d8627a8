"""demo_eval: full builtin-model turns over the domain's routing cases, judged by the expected tools' schemas."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from agents.models import Conversation, Turn
from bench.demo_eval import domain_cases, judge

BALANCE = {"type": "object", "required": ["member_id"], "additionalProperties": False,
           "properties": {"member_id": {"type": "string", "pattern": "^mem_[a-z0-9]{8,}$"}}}  # fmt: skip
SCHEMAS = {"get_member_balance": BALANCE}
EXPECTED = ("get_member_balance",)


def test_a_call_of_an_expected_tool_passes_only_with_arguments_its_schema_accepts():
    good = (("get_member_balance", {"member_id": "mem_lan00001"}),)
    bad = (("get_member_balance", {"member_id": "M-300"}),)
    assert judge("balance of mem_lan00001", EXPECTED, good, "", SCHEMAS) == "called"
    assert judge("balance of M-300", EXPECTED, bad, "", SCHEMAS) != "called"


def test_a_question_passes_when_it_names_the_tool_and_a_required_value_the_request_lacks():
    question = "To call get_member_balance I need member_id: what is the member_id?"
    assert judge("balance of M-300", EXPECTED, (), question, SCHEMAS) == "asked"
    assert judge("balance of mem_lan00001", EXPECTED, (), question, SCHEMAS) != "asked", "the value was there"
    assert judge("balance of M-300", EXPECTED, (), "What is the member_id?", SCHEMAS) != "asked", "which tool?"
    assert judge("balance of M-300", EXPECTED, (), "get_member_balance needs a member_id.", SCHEMAS) != "asked"


@pytest.mark.django_db
def test_the_domains_cases_are_those_expecting_a_tool_of_the_domain(demo_catalog):
    cases = [
        {"id": "a", "query": "q", "expect": {"includes_any": ["calculate"], "also_any": ["get_member_balance"]}},
        {"id": "b", "query": "q", "expect": {"includes": ["calculate"]}},
        {"id": "c", "query": "q", "expect": {"excludes": ["merge_members"]}},
    ]
    assert [(case["id"], expected) for case, expected in domain_cases(cases, "loyalty")] == [
        ("a", ("get_member_balance",))
    ]


@pytest.mark.django_db
def test_the_command_runs_full_turns_rolls_them_back_and_prints_rates_per_language(
    demo_catalog, counted_embedder, tmp_path
):
    cases = tmp_path / "cases.jsonl"
    rows = [
        {"id": "e1", "lang": "en", "query": "how many points has member mem_lan00001 got",
         "expect": {"includes_any": ["get_member_balance"]}},
        {"id": "v1", "lang": "vi", "query": "thành viên M-300 có bao nhiêu điểm",
         "expect": {"includes_any": ["get_member_balance"]}},
        {"id": "x1", "lang": "en", "query": "what is 2 + 2", "expect": {"includes": ["calculate"]}},
    ]  # fmt: skip
    cases.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows), encoding="utf-8")
    out = StringIO()
    call_command("demo_eval", str(cases), "--json", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    per_case = {line["id"]: line for line in lines if "id" in line}
    assert set(per_case) == {"e1", "v1"}, "only the Loyalty cases run"
    assert (per_case["e1"]["how"], per_case["v1"]["how"]) == ("called", "asked")
    figures = lines[-1]
    assert figures["cases"] == 2 and set(figures["per_lang"]) == {"en", "vi"}
    assert "demo_eval: " in out.getvalue()
    assert not Turn.objects.exists() and not Conversation.objects.exists(), "each turn is rolled back"
