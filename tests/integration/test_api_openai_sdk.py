"""The official openai SDK against a live Daphne: client tools (plain, streaming, parallel, tool_choice) and errors.

Two servers on one embedded data dir: one with the builtin offline model, one whose model is a scripted
OpenAI-compatible server in this process (tests/support/scripted_openai.py), so each test says what the model does.
"""

import json
import urllib.error
import urllib.request

import openai
import pytest

from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import daphne, embedded_env, free_port, manage

pytestmark = pytest.mark.integration

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
}
CLOCK = {
    "type": "function",
    "function": {
        "name": "get_local_time",
        "description": "Local time of a time zone",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
    },
}
PARIS = [{"role": "user", "content": "What's the weather in Paris?"}]
SAVE_PROFILES = """import json, os
from agents.models import ModelProfile
for profile in json.loads(os.environ["PROFILES"]):
    ModelProfile.objects.update_or_create(name=profile.pop("name"), defaults=profile)"""
MODEL_ENV = {"TOOLHUB_MODEL": "scripted-model", "TOOLHUB_MODEL_RETRIES": "0", "TOOLHUB_MODEL_TIMEOUT": "4"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    env = embedded_env(tmp_path_factory.mktemp("sdk"))
    manage(env, "setup_demo")
    return env, manage(env, "create_api_key", "sdk").strip().splitlines()[-1]


@pytest.fixture(scope="module")
def builtin(setup):
    env, key = setup
    with daphne(env) as base:
        yield openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def scripted_server(setup):
    env, key = setup
    with ScriptedOpenAI() as model, daphne(env | MODEL_ENV | {"TOOLHUB_MODEL_BASE_URL": model.base_url}) as base:
        yield model, openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120), base, key


@pytest.fixture
def scripted(scripted_server):
    """(the scripted model, reset for this test; an SDK client of the server that calls it)."""
    model, client, _base, _key = scripted_server
    model.behaviour, model.steps, model.delay = "ok", [], 5.0
    model.requests.clear()
    return model, client


def weather_call(location: str) -> dict:
    return {"tool_calls": [{"name": "get_weather", "arguments": {"location": location}}]}


def streamed(stream) -> tuple[str, list[dict], str | None]:
    """(content, tool calls accumulated by index as OpenAI's streaming docs do, the finish reason)."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue  # toolhub's status frames
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for fragment in choice.delta.tool_calls or []:
            call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = fragment.id or call["id"]
            call["name"] += fragment.function.name or ""
            call["arguments"] += fragment.function.arguments or ""
        finish = choice.finish_reason or finish
    return content, [calls[index] for index in sorted(calls)], finish


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


# --- client tools ----------------------------------------------------------------------------------------


def test_a_client_tool_round_trip(scripted):
    model, client = scripted
    model.steps = [weather_call("Paris"), {"content": "Paris: 21 °C and sunny."}]
    first = client.chat.completions.create(model="toolhub", messages=PARIS, tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert (call.type, call.function.name, json.loads(call.function.arguments)) == (
        "function", "get_weather", {"location": "Paris"})  # fmt: skip
    assert [t["function"]["name"] for t in model.requests[0]["tools"]][-1] == "get_weather"

    result = '{"temperature_c": 21, "sky": "sunny"}'
    messages = [*PARIS, choice.message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": result}]  # fmt: skip
    final = client.chat.completions.create(model="toolhub", messages=messages, tools=[WEATHER])
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "Paris: 21 °C and sunny."
    assert tool_messages(model.requests[-1]) == [{"role": "tool", "tool_call_id": call.id, "content": result}]


def test_a_client_tool_round_trip_streaming(scripted):
    model, client = scripted
    model.steps = [weather_call("Paris"), {"content": "Paris: 21 °C and sunny."}]
    content, calls, finish = streamed(
        client.chat.completions.create(model="toolhub", messages=PARIS, tools=[WEATHER], stream=True)
    )
    assert finish == "tool_calls" and content == ""
    (call,) = calls
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"location": "Paris"}
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
        ],
    }
    messages = [*PARIS, assistant, {"role": "tool", "tool_call_id": call["id"], "content": "21 °C, sunny"}]  # fmt: skip
    content, calls, finish = streamed(
        client.chat.completions.create(model="toolhub", messages=messages, tools=[WEATHER], stream=True)
    )
    assert (content, calls, finish) == ("Paris: 21 °C and sunny.", [], "stop")
    assert tool_messages(model.requests[-1])[0]["content"] == "21 °C, sunny"


# The model asks for the weather of two cities at once, then answers from both results.
TWO_CITIES_STEPS = (
    {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}},
                    {"name": "get_weather", "arguments": {"location": "Rome"}}]},
    {"content": "Paris is sunny; Rome is rainy."},
)  # fmt: skip


def test_a_parallel_tool_call(scripted):
    model, client = scripted
    model.steps = list(TWO_CITIES_STEPS)
    messages = [{"role": "user", "content": "Weather in Paris and in Rome?"}]
    first = client.chat.completions.create(model="toolhub", messages=messages, tools=[WEATHER],
                                           parallel_tool_calls=True)  # fmt: skip
    assert model.requests[0]["parallel_tool_calls"] is True
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert [json.loads(c.function.arguments)["location"] for c in message.tool_calls] == ["Paris", "Rome"]
    results = [{"role": "tool", "tool_call_id": c.id, "content": sky}
               for c, sky in zip(message.tool_calls, ["sunny", "rainy"], strict=True)]  # fmt: skip
    messages = [*messages, message.model_dump(exclude_none=True), *results]
    final = client.chat.completions.create(model="toolhub", tools=[WEATHER], messages=messages)
    assert final.choices[0].message.content == "Paris is sunny; Rome is rainy."
    assert [m["content"] for m in tool_messages(model.requests[-1])] == ["sunny", "rainy"]


def test_a_parallel_tool_call_streaming(scripted):
    model, client = scripted
    model.steps = list(TWO_CITIES_STEPS)
    messages = [{"role": "user", "content": "Weather in Paris and in Rome?"}]
    content, calls, finish = streamed(client.chat.completions.create(
        model="toolhub", messages=messages, tools=[WEATHER], parallel_tool_calls=True, stream=True))  # fmt: skip
    assert model.requests[0]["parallel_tool_calls"] is True
    assert (content, finish) == ("", "tool_calls")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"location": "Paris"}), ("get_weather", {"location": "Rome"})]  # fmt: skip
    assert len({c["id"] for c in calls}) == 2
    assistant = {"role": "assistant", "content": None, "tool_calls": [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in calls]}  # fmt: skip
    results = [{"role": "tool", "tool_call_id": c["id"], "content": sky}
               for c, sky in zip(calls, ["sunny", "rainy"], strict=True)]  # fmt: skip
    content, calls, finish = streamed(client.chat.completions.create(
        model="toolhub", tools=[WEATHER], stream=True, messages=[*messages, assistant, *results]))  # fmt: skip
    assert (content, calls, finish) == ("Paris is sunny; Rome is rainy.", [], "stop")
    assert [m["content"] for m in tool_messages(model.requests[-1])] == ["sunny", "rainy"]


def test_tool_choice_passes_through_to_a_real_model(scripted):
    model, client = scripted
    model.steps = [{"tool_calls": [{"name": "get_local_time", "arguments": {"timezone": "Asia/Tokyo"}}]}]
    named = {"type": "function", "function": {"name": "get_local_time"}}
    reply = client.chat.completions.create(model="toolhub", messages=PARIS, tools=[WEATHER, CLOCK], tool_choice=named)
    assert model.requests[0]["tool_choice"] == named
    assert reply.choices[0].message.tool_calls[0].function.name == "get_local_time"


def test_tool_choice_required_and_named_with_the_builtin_model(builtin):
    required = builtin.chat.completions.create(model="toolhub", messages=PARIS, tools=[WEATHER],
                                               tool_choice="required")  # fmt: skip
    (call,) = required.choices[0].message.tool_calls
    assert required.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"location": "Paris"})

    named = {"type": "function", "function": {"name": "get_local_time"}}
    content, calls, finish = streamed(builtin.chat.completions.create(
        model="toolhub", stream=True, tools=[WEATHER, CLOCK], tool_choice=named,
        messages=[{"role": "user", "content": "What time is it in Europe/Paris?"}]))  # fmt: skip
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_local_time", {"timezone": "Europe/Paris"})
    ]

    auto = builtin.chat.completions.create(model="toolhub", messages=PARIS, tools=[WEATHER])
    assert auto.choices[0].finish_reason == "stop" and not auto.choices[0].message.tool_calls


# --- errors ---------------------------------------------------------------------------------------------


def bad_request(client, **fields) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="toolhub", **({"messages": PARIS} | fields))
    assert raised.value.status_code == 400 and raised.value.type == "invalid_request_error"
    return raised.value


BROKEN_SCHEMA = {**WEATHER, "function": {**WEATHER["function"], "parameters": {"type": "object", "required": "city"}}}
ABSENT = {"type": "function", "function": {"name": "get_stock_price"}}
CALL_1 = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
ORPHAN = [*PARIS, {"role": "assistant", "tool_calls": [CALL_1]},
          {"role": "tool", "tool_call_id": "call_9", "content": "sunny"}]  # fmt: skip
BAD_INPUT = {
    "invalid_tool_schema": {"tools": [BROKEN_SCHEMA]},
    "duplicate_tool_name": {"tools": [WEATHER, WEATHER]},
    "too_many_tools": {"tools": [{**WEATHER, "function": {**WEATHER["function"], "name": f"tool_{i}"}}
                                 for i in range(1000)]},
    "tool_not_found": {"tools": [WEATHER], "tool_choice": ABSENT},
    "invalid_tool_messages": {"tools": [WEATHER], "messages": ORPHAN},
    "tool_name_conflict": {"tools": [{**WEATHER, "function": {**WEATHER["function"], "name": "calculate"}}]},
}  # fmt: skip
BAD_INPUT_MESSAGES = {
    "invalid_tool_schema": "tools[0].function.parameters",
    "duplicate_tool_name": "'get_weather' is used twice",
    "too_many_tools": "1000 tools; at most 128",
    "tool_not_found": "get_stock_price",
    "invalid_tool_messages": "'call_9' answers no open tool call",
    "tool_name_conflict": "calculate",
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streaming"])
@pytest.mark.parametrize("code", list(BAD_INPUT))
def test_bad_client_tools_and_tool_messages_are_400s(builtin, code, stream):
    """Refused before anything is stored or streamed: streaming or not, the SDK raises BadRequestError."""
    error = bad_request(builtin, stream=stream, **BAD_INPUT[code])
    assert error.code == code and BAD_INPUT_MESSAGES[code] in error.message, error.message
    assert error.param


def test_context_too_long_is_a_400_before_anything_runs_streaming_or_not(builtin):
    huge = [{"role": "user", "content": "word " * 40_000}]
    assert bad_request(builtin, messages=huge).code == "context_length_exceeded"
    assert bad_request(builtin, messages=huge, stream=True).code == "context_length_exceeded"


def test_a_failing_model_server_is_a_502(scripted):
    model, client = scripted
    model.behaviour = "error"
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="toolhub", messages=PARIS)
    assert raised.value.status_code == 502 and raised.value.code == "model_unavailable"
    assert set(raised.value.response.json()) == {"error"}  # an error object, never an answer with the failure


def test_a_model_server_past_its_deadline_is_a_504(scripted):
    model, client = scripted
    model.behaviour, model.delay = "slow", 8
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="toolhub", messages=PARIS)
    assert raised.value.status_code == 504 and raised.value.code == "model_timeout"
    assert set(raised.value.response.json()) == {"error"}


def test_a_stream_past_the_models_deadline_sends_an_error_frame_then_done(scripted_server, scripted):
    model, client = scripted
    model.behaviour, model.delay = "slow", 8
    with pytest.raises(openai.APIError) as raised:
        streamed(client.chat.completions.create(model="toolhub", messages=PARIS, stream=True))
    assert raised.value.body["code"] == "model_timeout"
    _model, _client, base, key = scripted_server
    frames = raw_sse(base, key, {"model": "toolhub", "stream": True, "messages": PARIS})
    assert frames[-1] == "[DONE]"
    error = json.loads(frames[-2])["error"]
    assert (error["type"], error["code"]) == ("api_error", "model_timeout") and "deadline" in error["message"]
    assert not any(json.loads(f).get("choices") for f in frames[:-2] if f.startswith("{"))  # no answer chunk


def test_a_stream_that_fails_sends_an_error_frame_then_done(scripted_server, scripted):
    model, client = scripted
    model.behaviour = "error"
    with pytest.raises(openai.APIError) as raised:
        streamed(client.chat.completions.create(model="toolhub", messages=PARIS, stream=True))
    assert raised.value.body["code"] == "model_unavailable"
    _model, _client, base, key = scripted_server
    frames = raw_sse(base, key, {"model": "toolhub", "stream": True, "messages": PARIS})
    assert frames[-1] == "[DONE]"
    error = json.loads(frames[-2])
    assert error == {"error": {"message": error["error"]["message"], "type": "api_error", "param": None,
                               "code": "model_unavailable"}}  # fmt: skip
    assert not any("The turn failed" in frame for frame in frames)


def test_an_unreachable_model_server_is_a_502_plain_and_an_error_frame_streaming(setup):
    env, key = setup
    closed = f"http://127.0.0.1:{free_port()}/v1"
    with daphne(env | MODEL_ENV | {"TOOLHUB_MODEL_BASE_URL": closed}) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="toolhub", messages=PARIS)
        with pytest.raises(openai.APIError) as raised_in_stream:
            streamed(client.chat.completions.create(model="toolhub", messages=PARIS, stream=True))
        frames = raw_sse(base, key, {"model": "toolhub", "stream": True, "messages": PARIS})
    assert raised.value.status_code == 502 and raised.value.code == "model_unavailable"
    assert set(raised.value.response.json()) == {"error"}
    assert raised_in_stream.value.body["code"] == "model_unavailable"
    assert frames[-1] == "[DONE]" and json.loads(frames[-2])["error"]["code"] == "model_unavailable"
    assert "APIConnectionError" not in raised.value.message and "could not be reached" in raised.value.message


def raw_sse(base: str, key: str, body: dict) -> list[str]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return [line.decode().strip().removeprefix("data: ") for line in response if line.startswith(b"data: ")]


def test_models_retrieve_and_a_request_without_model(builtin):
    assert builtin.models.retrieve("toolhub").id == "toolhub"
    with pytest.raises(openai.NotFoundError) as raised:
        builtin.models.retrieve("gpt-17")
    assert raised.value.code == "model_not_found"
    # No `model` in the body at all (openai.omit): the default model answers, the builtin one, labelled so.
    question = [{"role": "user", "content": "What is 15 + 27?"}]
    raw = builtin.chat.completions.with_raw_response.create(model=openai.omit, messages=question)
    reply = raw.parse()
    assert "model" not in json.loads(raw.http_request.content)
    assert reply.model == "builtin-offline-rule-based" and "42" in reply.choices[0].message.content
    chunks = list(builtin.chat.completions.create(model=openai.omit, messages=question, stream=True))
    assert "42" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert {c.model for c in chunks if c.choices} == {"builtin-offline-rule-based"}


def test_unknown_v1_paths_are_json_404s_the_sdk_raises(builtin):
    with pytest.raises(openai.NotFoundError) as embeddings:
        builtin.embeddings.create(model="toolhub", input="hello")
    with pytest.raises(openai.NotFoundError) as completions:
        builtin.completions.create(model="toolhub", prompt="hello")
    for raised, path in ((embeddings, "/v1/embeddings"), (completions, "/v1/completions")):
        assert raised.value.response.headers["content-type"].startswith("application/json")
        assert raised.value.response.json() == {"error": {"message": f"Unknown API path {path!r}.",
                                                          "type": "invalid_request_error", "param": None,
                                                          "code": "not_found"}}  # fmt: skip


def test_two_profiles_answer_from_two_upstream_models_through_the_sdk(scripted_server, setup):
    """Each profile calls its own model at its own server with the key its variable holds; /v1/models lists them."""
    _model, client, _base, _key = scripted_server
    env, _ = setup
    with ScriptedOpenAI() as first, ScriptedOpenAI() as second:
        budgets = {"context_window": 8192, "max_output_tokens": 1024, "reserved_result_tokens": 1024}
        profiles = [
            {"name": "sdk-a", "upstream_model": "model-a", "base_url": first.base_url} | budgets,
            {"name": "sdk-b", "upstream_model": "model-b", "base_url": second.base_url, "api_key_env": "HOME"}
            | budgets | {"context_window": 32768},
        ]  # fmt: skip
        manage(env | {"PROFILES": json.dumps(profiles)}, "shell", "-c", SAVE_PROFILES)
        first.steps, second.steps = [{"content": "from a"}], [{"content": "from b"}]
        a = client.chat.completions.create(model="sdk-a", messages=PARIS)
        b = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="sdk-b", messages=PARIS, stream=True) if c.choices)  # fmt: skip
        listed = {m.id: m for m in client.models.list()}
    assert (a.model, a.choices[0].message.content, b) == ("model-a", "from a", "from b")
    assert [r["model"] for r in first.requests] == ["model-a"] and [r["model"] for r in second.requests] == ["model-b"]
    assert second.api_keys == [env["HOME"]]  # the value of the variable the profile names
    assert (listed["sdk-b"].context_window, listed["sdk-b"].upstream_model) == (32768, "model-b")
