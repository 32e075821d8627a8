"""A turn end to end in the embedded default: steward, bundle, model loop, events, records."""

import sys

import pytest

from agents.models import TOOL_EXECUTION_PHASE, Conversation, Message, RoutingLog, Turn, TurnEvent
from agents.tools import web
from agents.turns import runtime
from agents.turns.memory import validate_transcript
from agents.turns.start import create_turn
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(demo_catalog):
    return Conversation.objects.create(owner=make_user())


def run(conversation, text, **kwargs) -> Turn:
    turn = create_turn(conversation, text, **kwargs)
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def events(turn, type=None):
    rows = TurnEvent.objects.filter(turn=turn).order_by("sequence")
    return [e for e in rows if type is None or e.type == type]


def answer(turn) -> str:
    return "".join(e.payload["content"] for e in events(turn, TurnEvent.Type.DELTA))


def statuses(turn) -> list[tuple[str, str]]:
    return [(e.phase, e.payload["message"]) for e in events(turn, TurnEvent.Type.STATUS)]


def test_arithmetic_turn_calls_the_calculator_and_answers_42(conversation):
    turn = run(conversation, "What is 15 + 27?")
    assert turn.status == Turn.Status.DONE
    assert statuses(turn)[:2] == [
        ("analysis", "🤵 Consulting the steward..."),
        ("analysis_complete", "✓ Steward consultation complete"),
    ]
    assert events(turn, TurnEvent.Type.STATUS)[1].payload["recommended_tools"] == ["calculate"]
    assert "42" in answer(turn)
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_CALL)] == ["calculate"]
    assert [e.sequence for e in events(turn)] == list(range(1, len(events(turn)) + 1))
    assert events(turn)[-1].type == TurnEvent.Type.DONE


def test_general_knowledge_takes_the_no_assistance_path(conversation):
    turn = run(conversation, "What is the capital of France?")
    assert ("analysis_complete", "✓ No further assistance required - answering from general knowledge") in statuses(
        turn
    )
    assert not events(turn, TurnEvent.Type.TOOL_CALL)
    assert "builtin offline model" in answer(turn)


def test_time_question_is_injected_silently(conversation):
    turn = run(conversation, "What time is it in Paris?")
    assert not any(phase in ("tool", TOOL_EXECUTION_PHASE) for phase, _ in statuses(turn))
    assert all("recommended_tools" not in e.payload for e in events(turn, TurnEvent.Type.STATUS))
    assert "Paris" in answer(turn)


def test_the_tool_execution_phase_is_named_as_the_seed_names_it():
    assert TOOL_EXECUTION_PHASE == "tool_execution"


def test_a_tool_outside_the_status_tools_runs_without_a_status(conversation):
    turn = run(conversation, "What is 15 + 27?")
    assert not [e for e in events(turn, TurnEvent.Type.STATUS) if e.payload.get("tool_name") == "calculate"]
    assert not any(phase == "tool_execution" or text.startswith("🔧 Using") for phase, text in statuses(turn))
    # The console still sees the call and its result.
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_CALL)] == ["calculate"]
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_RESULT)] == ["calculate"]


def test_a_tool_added_to_the_status_tools_announces_its_run(conversation, settings):
    settings.TOOLHUB_STATUS_TOOLS = ("web_search", "calculate")
    turn = run(conversation, "What is 15 + 27?")
    (announced,) = [e for e in events(turn, TurnEvent.Type.STATUS) if e.payload.get("tool_name") == "calculate"]
    assert (announced.phase, announced.payload["message"]) == ("tool_execution", "🔧 Using calculate")
    assert announced.payload["arguments"] == {"expression": "15 + 27"}
    (call,) = events(turn, TurnEvent.Type.TOOL_CALL)
    assert announced.sequence < call.sequence


@pytest.fixture
def searched(conversation, scripted_model, settings, monkeypatch):
    """Runs a turn whose model calls web_search once; SearXNG answers with no results."""
    settings.SEARXNG_URL = "http://searxng.invalid"
    monkeypatch.setattr(web, "_fetch", lambda url, seconds: b'{"results": []}')

    def search() -> Turn:
        scripted_model.steps = [
            {"tool_calls": [{"name": "web_search", "arguments": {"query": "weather in Tokyo"}}]},
            {"content": "I found nothing."},
        ]
        return run(conversation, "What's the weather in Tokyo?")

    return search


def search_statuses(turn) -> list[tuple[str, str]]:
    return [(e.phase, e.payload["message"]) for e in events(turn, TurnEvent.Type.STATUS)
            if e.payload.get("tool_name") == "web_search"]  # fmt: skip


def test_web_search_announces_its_query_with_the_tool_execution_phase(searched):
    turn = searched()
    assert search_statuses(turn) == [("tool_execution", '🔍 Searching the web: "weather in Tokyo"')]
    assert not any(text.startswith("🔧 Using") for _, text in statuses(turn))
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_CALL)] == ["web_search"]


def test_show_web_search_status_off_silences_the_search_status(searched, settings):
    settings.TOOLHUB_STEWARD_OPTIONS = {**settings.TOOLHUB_STEWARD_OPTIONS, "show_web_search_status": False}
    turn = searched()
    assert search_statuses(turn) == []
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_RESULT)] == ["web_search"]


def test_web_search_left_out_of_the_status_tools_is_not_announced(searched, settings):
    settings.TOOLHUB_STATUS_TOOLS = ("calculate",)
    turn = searched()
    assert search_statuses(turn) == []
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_CALL)] == ["web_search"]


def test_turn_records_messages_and_a_routing_log(conversation):
    turn = run(conversation, "What is 15 + 27?")
    roles = list(Message.objects.filter(turn=turn).values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "assistant"]
    log = RoutingLog.objects.get(turn=turn)
    assert log.recommended == ["calculate"] and log.called == ["calculate"]
    assert log.loaded_schema_tokens < log.catalog_schema_tokens / 10
    assert log.turn_ms is not None


def test_a_finished_turn_is_never_run_twice(conversation):
    turn = run(conversation, "What is 15 + 27?")
    count = TurnEvent.objects.filter(turn=turn).count()
    runtime.run_turn(turn.id)
    assert TurnEvent.objects.filter(turn=turn).count() == count


def test_a_redelivered_running_turn_restarts_cleanly(conversation):
    turn = create_turn(conversation, "What is 15 + 27?")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING)
    Message.objects.create(conversation=conversation, turn=turn, role="assistant", content="half an answ")
    runtime.run_turn(turn.id)
    contents = list(Message.objects.filter(turn=turn, role="assistant").values_list("content", flat=True))
    assert "half an answ" not in contents and any("42" in c for c in contents)


def test_switching_two_stage_off_skips_the_steward(conversation):
    turn = run(conversation, "What is 15 + 27?", two_stage=False)
    assert not any(phase == "analysis" for phase, _ in statuses(turn))
    assert RoutingLog.objects.get(turn=turn).two_stage is False


def tool_messages(turn) -> list[str]:
    return list(Message.objects.filter(turn=turn, role="tool").values_list("content", flat=True))


def test_a_deferred_tool_called_before_search_is_refused_then_found_and_called(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "dns_lookup", "arguments": {"hostname": "localhost", "record_type": "A"}}]},
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "resolve dns records of a hostname"}}]},
        {"tool_calls": [{"name": "dns_lookup", "arguments": {"hostname": "localhost", "record_type": "A"}}]},
        {"content": "localhost resolves to 127.0.0.1."},
    ]
    # A greeting gets no tool recommended, so dns_lookup stays deferred until the model searches.
    turn = run(conversation, "hi there, can you help me with something")
    refused, searched, resolved = tool_messages(turn)
    assert "dns_lookup is deferred: call tool_search to load it first." in refused
    assert "dns_lookup" in searched
    assert "127.0.0.1" in resolved
    assert answer(turn) == "localhost resolves to 127.0.0.1."
    first_request_tools = {t["function"]["name"] for t in scripted_model.requests[0].get("tools", [])}
    third_request_tools = {t["function"]["name"] for t in scripted_model.requests[2].get("tools", [])}
    assert "dns_lookup" not in first_request_tools and "dns_lookup" in third_request_tools
    assert "## Deferred tools" in scripted_model.requests[0]["messages"][0]["content"]


def test_missing_required_arguments_are_asked_not_invented(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "calculate", "arguments": {}}]},
        {"content": "Which expression should I calculate?"},
    ]
    turn = run(conversation, "calculate it for me")
    (refusal,) = tool_messages(turn)
    assert "Missing required arguments: expression. Ask the user for them" in refusal
    assert RoutingLog.objects.get(turn=turn).called == ["calculate"]


def test_an_unpolicied_tool_is_refused_with_its_reason(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "purge_container_images", "arguments": {}}]},
        {"content": "I cannot purge images."},
    ]
    turn = run(conversation, "purge the docker images")
    (refusal,) = tool_messages(turn)
    assert "not available for this request: no policy (fail closed)" in refusal


def test_model_server_failure_fails_the_turn_visibly(conversation, scripted_model):
    scripted_model.behaviour = "error"
    turn = run(conversation, "hello")
    assert turn.status == Turn.Status.FAILED
    assert events(turn, TurnEvent.Type.ERROR)[0].payload["message"].startswith("The turn failed:")
    assert events(turn)[-1].type == TurnEvent.Type.DONE


def test_a_turn_failed_mid_tool_call_leaves_a_conversation_whose_next_turn_runs(conversation, scripted_model):
    """The worker died while a tool ran (the watchdog fails the turn): its call gets a result saying so, so the
    next turn's transcript is valid and its model knows the call may have run."""
    from agents.turns import lifecycle, watchdog
    from agents.turns.events import FailureReason

    turn = create_turn(conversation, "transfer 100 points from M-1 to M-2")
    call = {"id": "call_1", "type": "function", "function": {"name": "transfer_points", "arguments": "{}"}}
    Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.ASSISTANT, tool_calls=[call])
    assert lifecycle.fail_turn(turn.pk, FailureReason.WORKER_LOST, watchdog.FAILURES[FailureReason.WORKER_LOST])

    (answered,) = tool_messages(turn)
    assert "may or may not have taken effect" in answered and "worker" in answered
    assert Message.objects.get(turn=turn, role=Message.Role.TOOL).tool_call_id == "call_1"
    scripted_model.steps = [{"content": "Let me check whether it went through."}]
    assert run(conversation, "did it work?").status == Turn.Status.DONE
    sent = scripted_model.requests[-1]["messages"]  # an OpenAI server refuses a tool call left unanswered
    validate_transcript(sent)
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_1" for m in sent)


def test_a_search_with_no_hits_returns_empty_and_a_status_event(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "regex:^zzz_nothing_like_this$"}}]},
        {"content": "Nothing found."},
    ]
    turn = run(conversation, "find me a tool")
    (result,) = tool_messages(turn)
    assert '"found": []' in result
    assert any(message.startswith("🔎 No tool matches") for _, message in statuses(turn))


def test_a_bad_regex_is_an_error_result_not_a_crash(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "regex:([unclosed"}}]},
        {"content": "That pattern was invalid."},
    ]
    turn = run(conversation, "find me a tool")
    assert turn.status == Turn.Status.DONE
    (result,) = tool_messages(turn)
    assert '"error"' in result
    assert any(message.startswith("🔎 Tool search failed") for _, message in statuses(turn))


def test_with_embeddings_off_tool_search_says_it_ran_keyword_only(conversation, scripted_model, settings):
    settings.TOOLHUB_SEARCH_EMBEDDINGS = False
    scripted_model.steps = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "resolve dns records"}}]},
        {"content": "Found it."},
    ]
    turn = run(conversation, "find me a tool")
    (result,) = tool_messages(turn)
    assert "dns_lookup" in result and '"mode": "bm25"' in result
    assert any(message.startswith("🔎 Tool search ran keyword-only") for _, message in statuses(turn))


def test_a_deferred_mcp_tool_runs_on_the_demo_mcp_server(conversation, scripted_model, tmp_path):
    server = McpServer.objects.create(
        name="loyalty", transport="stdio", command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(tmp_path / "loyalty.sqlite3")],
    )  # fmt: skip
    assert sync_server(server).ok
    scripted_model.steps = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "select:list_campaigns"}}]},
        {"tool_calls": [{"name": "list_campaigns", "arguments": {}}]},
        {"content": "Here are the campaigns."},
    ]
    turn = run(conversation, "list the campaigns")
    searched, listed = tool_messages(turn)
    assert "list_campaigns" in searched
    assert "cmp_tet2026a" in listed


def test_an_mcp_server_crashing_mid_call_gives_a_tool_error_and_a_status_and_the_turn_finishes(
    conversation, scripted_model, tmp_path
):
    server = McpServer.objects.create(
        name="loyalty", transport="stdio", command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(tmp_path / "loyalty.sqlite3"),
              "--test-crash-on", "list_campaigns"],
    )  # fmt: skip
    assert sync_server(server).ok
    scripted_model.steps = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "select:list_campaigns"}}]},
        {"tool_calls": [{"name": "list_campaigns", "arguments": {}}]},
        {"content": "The campaign service is down right now."},
    ]

    turn = run(conversation, "list the campaigns")

    _searched, failed = tool_messages(turn)
    assert "closed the connection while running list_campaigns" in failed and '"error"' in failed
    assert any(phase == "tool_error" and "⚠ list_campaigns failed" in text for phase, text in statuses(turn))
    assert turn.status == Turn.Status.DONE and answer(turn) == "The campaign service is down right now."
