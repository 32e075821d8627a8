"""The router is multi-label, data-driven (any language) and safe with unclear intent."""

import pytest

from agents.models import ActionWord
from agents.router import ConversationState, Hits, classify, decide
from catalog.bundle import build_bundle
from catalog.decision import load_catalog
from catalog.demo_catalog import load_demo_catalog

pytestmark = pytest.mark.django_db

RULE_WORKFLOW = ConversationState(
    workflow_kind="rule_creation", workflow_phase="rule_formula", workflow_action="create"
)


@pytest.fixture(autouse=True)
def demo():
    load_demo_catalog()


@pytest.mark.parametrize(
    "text",
    ["Which rules does campaign SUMMER24 have?", "Chiến dịch SUMMER24 có những quy tắc nào?"],
)
def test_a_question_about_a_campaigns_rules_touches_two_domains(text):
    decision = classify(text)
    assert {"campaigns", "loyalty"} <= decision.domains
    assert decision.action == "list"
    assert decision.confidence >= 0.6


@pytest.mark.parametrize("text", ["Create a new campaign for Tet", "Tạo chiến dịch mới cho Tết"])
def test_create_requests_in_english_and_vietnamese(text):
    decision = classify(text)
    assert decision.action == "create"
    assert "campaigns" in decision.domains
    assert decision.confidence >= 0.6
    bundle = build_bundle(decision, load_catalog())
    assert "create_campaign" in bundle.searchable_names()


def test_unclear_create_has_low_confidence_and_exposes_no_create_tool():
    decision = classify("create something for me")
    assert decision.action == "create" and not decision.domains
    assert decision.confidence < 0.6
    bundle = build_bundle(decision, load_catalog())
    catalog = {entry.name: entry for entry in load_catalog()}
    exposed = bundle.searchable_names()
    assert not [name for name in exposed if catalog[name].policy.operation in {"create", "update", "delete"}]


def test_general_knowledge_has_no_domain_and_no_confidence():
    decision = classify("What is the capital of France?")
    assert decision.domains == frozenset()
    assert decision.confidence < 0.6


def test_a_read_question_inside_a_create_workflow_is_a_side_query():
    decision = classify("Which tiers do we have?", RULE_WORKFLOW)
    assert decision.side_query is True
    assert decision.phase == "rule_formula"
    assert decision.action == "list"


def test_an_answer_inside_a_workflow_continues_it():
    decision = classify("multiplier, factor 2", RULE_WORKFLOW)
    assert (decision.action, decision.phase, decision.side_query) == ("create", "rule_formula", False)
    assert decision.confidence >= 0.6
    bundle = build_bundle(decision, load_catalog())
    assert "set_rule_formula" in bundle.loaded_names
    assert "create_campaign" not in bundle.searchable_names()


def test_an_operator_word_in_another_language_is_learned_from_data():
    before = classify("dựng chiến dịch hè")
    assert before.action != "create"
    ActionWord.objects.create(phrase="Dựng", action="create")
    after = classify("dựng chiến dịch hè")
    assert after.action == "create" and after.confidence >= 0.6


def test_conflicting_write_actions_lower_confidence():
    decision = decide(Hits(actions={"create": 1, "delete": 1}, domains={"loyalty": 1}, first_action_at={"create": 0,
                      "delete": 5}), ConversationState())  # fmt: skip
    assert decision.action == "create" and decision.confidence < 0.6
