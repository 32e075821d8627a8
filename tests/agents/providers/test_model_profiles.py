"""A model profile names its upstream model: each profile calls its own model, server and key variable.

Fields a profile leaves empty come from TOOLHUB_MODEL, TOOLHUB_MODEL_BASE_URL and TOOLHUB_MODEL_API_KEY;
/v1/models lists the profiles with their context windows; the builtin model is labelled offline everywhere.
"""

import json

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from agents.access.api_keys import create_api_key
from agents.models import ModelProfile, Turn, TurnEvent
from agents.openai_api.views import open_turn, parse_request, served_model
from agents.providers import BUILTIN_MODEL_ID, upstream_of
from agents.turns import runtime
from tests.support.builders import make_user
from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import free_port

pytestmark = pytest.mark.django_db


def profile(name: str, **fields) -> ModelProfile:
    budget = {"context_window": 8192, "max_output_tokens": 1024, "reserved_result_tokens": 1024}
    return ModelProfile.objects.create(name=name, **(budget | fields))


def run_request(model: str | None, text: str = "Who wrote Hamlet?") -> Turn:
    """What the API does with a request for `model`: parse, store, run (eagerly, here)."""
    owner = User.objects.filter(username="profiles").first() or make_user("profiles")
    body = {"messages": [{"role": "user", "content": text}]} | ({"model": model} if model else {})
    turn = open_turn(owner, parse_request(json.dumps(body).encode()))
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def answer(turn: Turn) -> str:
    rows = TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.DELTA).order_by("sequence")
    return "".join(e.payload["content"] for e in rows)


@pytest.fixture
def two_servers(settings):
    """Two OpenAI-compatible servers; the settings name none (the builtin model is the default)."""
    settings.TOOLHUB_MODEL_RETRIES = 0
    with ScriptedOpenAI() as small, ScriptedOpenAI() as large:
        yield small, large


def test_two_profiles_call_two_upstream_models_at_their_own_servers_with_their_own_keys(
    demo_catalog, two_servers, monkeypatch
):
    small, large = two_servers
    monkeypatch.setenv("LARGE_MODEL_KEY", "sk-large-from-env")
    profile("chat-small", upstream_model="qwen2.5:7b-instruct", base_url=small.base_url)
    profile("chat-large", upstream_model="llama-3.1-70b", base_url=large.base_url, api_key_env="LARGE_MODEL_KEY",
            context_window=32768)  # fmt: skip
    small.steps = [{"content": "Shakespeare (small)."}]
    large.steps = [{"content": "Shakespeare (large)."}]

    first, second = run_request("chat-small"), run_request("chat-large")

    assert (first.status, answer(first)) == (Turn.Status.DONE, "Shakespeare (small).")
    assert (second.status, answer(second)) == (Turn.Status.DONE, "Shakespeare (large).")
    assert [r["model"] for r in small.requests] == ["qwen2.5:7b-instruct"]
    assert [r["model"] for r in large.requests] == ["llama-3.1-70b"]
    assert large.api_keys == ["sk-large-from-env"]
    assert first.model == f"qwen2.5:7b-instruct at {small.base_url}"
    assert second.model == f"llama-3.1-70b at {large.base_url}"


def test_a_profile_without_upstream_fields_calls_toolhub_model_with_its_key(demo_catalog, scripted_model, settings):
    settings.TOOLHUB_MODEL_API_KEY = "sk-settings"
    profile("chat-8k")
    scripted_model.steps = [{"content": "One."}, {"content": "Two."}]

    run_request("chat-8k")
    run_request(None)  # no model: `toolhub`, the default profile (chat-8k here)

    assert [r["model"] for r in scripted_model.requests] == ["scripted-model", "scripted-model"]
    assert scripted_model.api_keys == ["sk-settings", "sk-settings"]


def test_the_settings_key_never_goes_to_a_profiles_own_server(demo_catalog, scripted_model, settings):
    settings.TOOLHUB_MODEL_API_KEY = "sk-settings"
    with ScriptedOpenAI() as other:
        profile("elsewhere", upstream_model="m", base_url=other.base_url)
        other.steps = [{"content": "ok"}]
        run_request("elsewhere")
    assert other.api_keys == ["not-needed"]


def test_a_profile_naming_only_its_model_uses_the_settings_server(demo_catalog, scripted_model):
    profile("chat-mini", upstream_model="phi-3-mini")
    scripted_model.steps = [{"content": "ok"}]
    run_request("chat-mini")
    assert scripted_model.requests[0]["model"] == "phi-3-mini"


def test_an_unset_key_variable_fails_the_turn_as_model_unavailable_naming_the_variable(demo_catalog, two_servers):
    small, _ = two_servers
    profile("locked", upstream_model="m", base_url=small.base_url, api_key_env="TOOLHUB_TEST_UNSET_KEY")
    turn = run_request("locked")
    assert turn.status == Turn.Status.FAILED and not small.requests
    (error,) = TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.ERROR)
    assert error.payload["reason"] == "model_unavailable"
    assert "$TOOLHUB_TEST_UNSET_KEY" in error.payload["message"]


def test_without_any_server_a_profile_is_the_builtin_model_labelled_offline(demo_catalog, settings):
    chat = profile("chat-8k", upstream_model="qwen2.5:7b-instruct")  # no server anywhere: nothing to call
    assert upstream_of(chat).offline and served_model(chat) == served_model(None) == BUILTIN_MODEL_ID
    turn = run_request("chat-8k", "What is 15 + 27?")
    assert turn.status == Turn.Status.DONE and turn.model == "builtin (offline, rule-based)"


def test_a_real_profiles_answer_names_its_upstream_model(two_servers):
    small, _ = two_servers
    assert served_model(profile("chat-small", upstream_model="qwen2.5:7b-instruct", base_url=small.base_url)) == (
        "qwen2.5:7b-instruct")  # fmt: skip


def test_models_lists_every_profile_with_its_context_window_and_upstream(client, two_servers):
    small, _ = two_servers
    profile("chat-8k")
    profile("chat-32k", upstream_model="qwen2.5:32b", base_url=small.base_url, context_window=32768,
            max_output_tokens=4096, reserved_result_tokens=4096)  # fmt: skip
    headers = {"Authorization": f"Bearer {create_api_key(user=make_user(), name='t')[1]}"}

    data = client.get("/v1/models", headers=headers).json()["data"]

    assert [(m["id"], m["context_window"], m["upstream_model"], m["offline"]) for m in data] == [
        ("toolhub", 8192, BUILTIN_MODEL_ID, True),  # the default profile, chat-8k
        ("chat-8k", 8192, BUILTIN_MODEL_ID, True),
        ("chat-32k", 32768, "qwen2.5:32b", False),
    ]
    assert all(m["object"] == "model" and m["owned_by"] == "toolhub" and "created" in m for m in data)
    one = client.get("/v1/models/chat-32k", headers=headers).json()
    assert one == data[2] and one["max_output_tokens"] == 4096
    assert "base_url" not in one and "api_key_env" not in one


@pytest.mark.parametrize(
    "field,value",
    [("api_key_env", "sk-live-1234"), ("api_key_env", "MY KEY"), ("base_url", "ftp://models"),
     ("base_url", "127.0.0.1:11434/v1")],
)  # fmt: skip
def test_a_profile_refuses_a_key_in_place_of_a_variable_name_and_a_non_http_base_url(field, value):
    candidate = ModelProfile(name="p", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024,
                             **{field: value})  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        candidate.full_clean()
    assert field in refused.value.message_dict


def test_a_profile_accepts_a_container_host_name_and_a_variable_name():
    ModelProfile(name="p", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024,
                 base_url="http://vllm:8000/v1", api_key_env="VLLM_API_KEY").full_clean()  # fmt: skip


def test_the_admin_edits_a_profiles_upstream_fields(admin_client):
    page = admin_client.get("/admin/agents/modelprofile/add/").content.decode()
    assert all(f'name="{field}"' in page for field in ("upstream_model", "base_url", "api_key_env"))
    fields = {
        "name": "chat-ollama",
        "upstream_model": "qwen2.5:7b-instruct",
        "base_url": "http://127.0.0.1:11434/v1",
        "api_key_env": "",
        "context_window": 32768,
        "max_output_tokens": 4096,
        "reserved_result_tokens": 4096,
    }
    response = admin_client.post("/admin/agents/modelprofile/add/", fields)
    assert response.status_code == 302
    listing = admin_client.get("/admin/agents/modelprofile/").content.decode()
    assert "qwen2.5:7b-instruct at http://127.0.0.1:11434/v1" in listing


def test_the_console_offers_each_profile_with_the_model_it_calls(two_servers):
    from agents.console.forms import ChatForm

    small, _ = two_servers
    profile("chat-small", upstream_model="qwen2.5:7b-instruct", base_url=small.base_url)
    profile("chat-8k")
    assert dict(ChatForm().fields["model"].choices) == {
        "toolhub": "default profile",
        "chat-8k": "chat-8k: builtin (offline, rule-based)",
        "chat-small": f"chat-small: qwen2.5:7b-instruct at {small.base_url}",
    }


# --- the LLM steward and the page header follow the profiles too -------------------------------------


@pytest.fixture
def llm_steward(settings):
    settings.TOOLHUB_STEWARD = "llm"
    settings.TOOLHUB_STEWARD_OPTIONS = settings.TOOLHUB_STEWARD_OPTIONS | {"analysis_timeout": 5.0}


def recommendation(*tools: str) -> dict:
    return {"content": json.dumps({"tools": list(tools), "reasoning": "scripted"})}


def test_the_llm_steward_asks_the_model_of_the_turns_profile(demo_catalog, two_servers, llm_steward, monkeypatch):
    small, large = two_servers  # the settings name no server: only the profiles' own servers can answer
    monkeypatch.setenv("LARGE_MODEL_KEY", "sk-large-from-env")
    profile("chat-small", upstream_model="qwen2.5:7b-instruct", base_url=small.base_url)
    profile("chat-large", upstream_model="llama-3.1-70b", base_url=large.base_url, api_key_env="LARGE_MODEL_KEY")
    large.steps = [recommendation("list_campaigns"), {"content": "Two campaigns."}]

    turn = run_request("chat-large", "list the active campaigns")

    steward, model = large.requests
    assert steward["model"] == "llama-3.1-70b" and steward["response_format"]["json_schema"]["name"] == (
        "ToolRecommendation")  # fmt: skip
    assert large.api_keys[0] == "sk-large-from-env" and "response_format" not in model
    assert not small.requests
    assert (turn.routing_log.steward_mode, turn.routing_log.fallback) == ("llm", False)
    assert turn.routing_log.recommended == ["list_campaigns"]


def test_outside_a_turn_the_llm_steward_asks_the_default_profiles_model(
    demo_catalog, two_servers, llm_steward, settings
):
    from agents.router import analyze

    small, _ = two_servers
    settings.TOOLHUB_MODEL_PROFILE = "chat-small"
    profile("chat-small", upstream_model="qwen2.5:7b-instruct", base_url=small.base_url)
    small.steps = [recommendation("list_campaigns")]

    result = analyze("list the active campaigns")  # as tool_search over /mcp does: no turn, no profile

    assert [r["model"] for r in small.requests] == ["qwen2.5:7b-instruct"]
    assert result.recommended_tools == ("list_campaigns",) and not result.fallback


def test_a_builtin_profiles_llm_steward_falls_back_to_the_rules_and_says_why(demo_catalog, two_servers, llm_steward):
    profile("chat-8k")  # no server of its own, none in the settings: the builtin model
    turn = run_request("chat-8k", "What is 15 + 27?")
    assert turn.status == Turn.Status.DONE and "42" in answer(turn)
    assert turn.routing_log.fallback and turn.routing_log.recommended == ["calculate"]
    assert not any(server.requests for server in two_servers)


def test_the_page_header_names_the_default_profiles_model(admin_client, two_servers, settings):
    small, _ = two_servers
    settings.TOOLHUB_MODEL_PROFILE = "chat-small"
    profile("chat-small", upstream_model="qwen2.5:7b-instruct", base_url=small.base_url)
    header = f'title="Model this instance runs">qwen2.5:7b-instruct at {small.base_url}</span>'
    assert header in admin_client.get("/console/").content.decode()
    settings.TOOLHUB_MODEL_PROFILE = "chat-8k"
    profile("chat-8k")
    assert 'title="Model this instance runs">builtin (offline, rule-based)</span>' in admin_client.get(
        "/console/").content.decode()  # fmt: skip


def test_a_model_server_that_is_down_or_answers_an_error_is_named_so_on_the_failed_turn(demo_catalog, two_servers):
    small, _ = two_servers
    small.behaviour = "error"
    profile("erring", upstream_model="m", base_url=small.base_url)
    profile("down", upstream_model="m", base_url=f"http://127.0.0.1:{free_port()}/v1")
    for name, said in [("erring", "answered HTTP 500"), ("down", "could not be reached (no connection)")]:
        turn = run_request(name)
        (error,) = TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.ERROR)
        assert turn.status == Turn.Status.FAILED and error.payload["reason"] == "model_unavailable"
        assert said in error.payload["message"] and "scripted failure" not in error.payload["message"]
