"""The steward: the seed's table, policy-restricted ranking, and an LLM steward that never blocks."""

import json

import pytest

from agents.router import ConversationState, analyze
from tests.support.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.django_db

SEED_TABLE = [
    ("What is 15 + 27?", ["calculate"], "math"),
    ("What's the weather in Tokyo?", ["web_search"], "realtime"),
    ("What time is it in Paris?", ["get_current_time"], "time"),
    ("Who won the 2024 Olympics?", ["web_search"], "realtime"),
    ("What is the capital of France?", [], "general"),
    ("Calculate 50% of 200", ["calculate"], "math"),
    ("sqrt(144)", ["calculate"], "math"),
]


@pytest.fixture(autouse=True)
def demo(demo_catalog):
    return demo_catalog


@pytest.mark.parametrize("text,expected,intent", SEED_TABLE)
def test_seed_table(text, expected, intent):
    # The steward leads with the seed's tool and may add up to two close candidates of the intent.
    result = analyze(text)
    assert list(result.recommended_tools[:1]) == expected
    assert len(result.recommended_tools) <= 3 and (expected or not result.recommended_tools)
    assert result.intent == intent
    assert result.requires_assistance is bool(expected)
    assert result.mode == "rules" and not result.fallback


def test_time_questions_inject_the_current_time_silently():
    result = analyze("What time is it in Paris?")
    assert result.silent is True
    assert result.context.startswith("Current date and time: ")
    assert analyze("What is 15 + 27?").silent is False


def test_domain_request_recommends_allowed_tools_only():
    result = analyze("list the active campaigns")
    assert result.recommended_tools and result.recommended_tools[0] == "list_campaigns"
    assert 1 <= len(result.recommended_tools) <= 5
    assert "export_member_data" not in result.recommended_tools


def test_unclear_create_recommends_no_write_tool(settings):
    result = analyze("create something for me")
    assert result.decision.action != "create" or result.decision.confidence < settings.TOOLHUB_MIN_CONFIDENCE
    assert not any(name.startswith(("create_", "update_", "delete_")) for name in result.recommended_tools)


def test_side_query_inside_a_workflow_recommends_read_tools():
    state = ConversationState("rule_creation", "rule_formula", "create")
    result = analyze("which tiers do we have?", state)
    assert result.decision.side_query
    assert "create_campaign" not in result.recommended_tools


def test_max_recommended_tools_is_respected(settings):
    settings.TOOLHUB_STEWARD_OPTIONS = settings.TOOLHUB_STEWARD_OPTIONS | {"max_recommended_tools": 2}
    assert len(analyze("show campaigns rewards vouchers members and tiers").recommended_tools) <= 2


# --- the LLM steward against a scripted OpenAI-compatible server ------------------------------


@pytest.fixture
def llm(settings):
    with ScriptedOpenAI() as server:
        settings.TOOLHUB_MODEL_PROVIDER = "openai"
        settings.TOOLHUB_MODEL_BASE_URL = server.base_url
        settings.TOOLHUB_MODEL = "scripted-steward"
        settings.TOOLHUB_STEWARD_OPTIONS = settings.TOOLHUB_STEWARD_OPTIONS | {"analysis_timeout": 0.5}
        yield server


def test_llm_steward_uses_the_models_choice_among_allowed_candidates(llm):
    llm.content = json.dumps({"tools": ["get_campaign", "list_campaigns"], "reasoning": "campaign lookup"})
    result = analyze("list the active campaigns", mode="llm")
    assert result.recommended_tools == ("get_campaign", "list_campaigns")
    assert (result.mode, result.fallback, result.reasoning) == ("llm", False, "campaign lookup")
    (request,) = llm.requests
    assert request["model"] == "scripted-steward"
    assert request["response_format"]["json_schema"]["name"] == "ToolRecommendation"
    listing = request["messages"][1]["content"]
    assert "list_campaigns" in listing and "export_member_data" not in listing
    assert listing.count("\n- ") <= 50


@pytest.mark.parametrize("behaviour", ["slow", "error", "invalid", "invented"])
def test_llm_steward_failures_fall_back_to_the_rules(llm, behaviour):
    llm.behaviour = "ok" if behaviour == "invented" else behaviour
    # Had the steward waited for the slow server, this valid answer would have won.
    tools = ["made_up_tool"] if behaviour == "invented" else ["get_current_date"]
    llm.content = json.dumps({"tools": tools, "reasoning": "guess"})
    result = analyze("What is 15 + 27?", mode="llm")
    assert result.fallback is True
    assert result.recommended_tools == ("calculate",)
    assert result.mode == "rules"
    assert "fallback" in result.reasoning


def test_hybrid_asks_the_llm_only_when_confidence_is_low(llm, settings):
    high = analyze("list the active campaigns", mode="rules").decision.confidence
    low = analyze("do something about that member thing", mode="rules").decision.confidence
    assert low < high
    settings.TOOLHUB_MIN_CONFIDENCE = (low + high) / 2  # between the two requests' calibrated confidences
    llm.content = json.dumps({"tools": [], "reasoning": "general knowledge"})
    confident = analyze("list the active campaigns", mode="hybrid")
    assert confident.mode == "rules" and not llm.requests
    unsure = analyze("do something about that member thing", mode="hybrid")
    assert unsure.mode == "hybrid" and len(llm.requests) == 1
