"""An MCP server's sampling request during a turn's tool call: answered by the turn's model, for owners who may
start turns, within TOOLHUB_MCP_SAMPLING_MAX_TOKENS (agents.turns.sampling)."""

import asyncio

import mcp_types as types
import pytest

from agents.providers import ModelChunk, ModelUnavailable
from agents.turns.sampling import CANNOT_ELICIT_URL, chat_messages, complete, turn_caller
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


class RecordingModel:
    label = "recording model"
    name = "recording"

    def __init__(self, answer: str = "an answer", fails: bool = False):
        self.answer, self.fails, self.calls = answer, fails, []

    def stream(self, messages, tools, *, hints, max_tokens=None, **options):
        self.calls.append({"messages": messages, "tools": tools, "max_tokens": max_tokens})
        if self.fails:
            raise ModelUnavailable("the model at http://model failed: APIConnectionError")
        yield ModelChunk(content=self.answer)


def request(*messages, max_tokens=100, system_prompt=None) -> types.CreateMessageRequestParams:
    return types.CreateMessageRequestParams(messages=list(messages), max_tokens=max_tokens, system_prompt=system_prompt)


def said(text: str, role: str = "user") -> types.SamplingMessage:
    return types.SamplingMessage(role=role, content=types.TextContent(type="text", text=text))


def test_the_turns_model_answers_with_the_servers_prompt_only_and_at_most_the_allowed_tokens(settings):
    settings.TOOLHUB_MCP_SAMPLING_MAX_TOKENS = 50
    model = RecordingModel("Paris")

    result = complete(model, request(said("Capital of France?"), max_tokens=10_000, system_prompt="Be brief."))

    assert (result.content.text, result.model, result.stop_reason) == ("Paris", "recording model", "endTurn")
    assert model.calls == [{"messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Capital of France?"}],
                            "tools": [], "max_tokens": 50}]  # fmt: skip


def test_an_answer_longer_than_asked_is_cut_to_max_tokens():
    result = complete(RecordingModel("word " * 500), request(said("Talk"), max_tokens=20))
    assert result.stop_reason == "maxTokens"
    assert 0 < len(result.content.text) < len("word " * 40)


def test_a_failing_model_or_a_non_text_message_is_an_error_the_server_reads():
    failed = complete(RecordingModel(fails=True), request(said("Hi")))
    assert failed.message == "The turn's model could not answer: the model at http://model failed: APIConnectionError."
    image = types.SamplingMessage(role="user", content=types.ImageContent(type="image", data="AA==",
                                                                          mime_type="image/png"))  # fmt: skip
    assert chat_messages(request(image)) == "a image message (toolhub samples text only)"
    assert "toolhub samples text only" in complete(RecordingModel(), request(image)).message


def test_only_an_owner_who_may_start_turns_spends_the_turns_model_on_sampling():
    model = RecordingModel("yes")
    operator = turn_caller(owner=make_user(username="op", role="operator"), conversation_id=3, model=model,
                           turn_id=1, attempt=1)  # fmt: skip
    viewer = turn_caller(owner=make_user(username="vi", role="viewer"), conversation_id=4, model=model, turn_id=2,
                         attempt=1)  # fmt: skip

    assert operator.session_key == "conversation:3"
    assert operator.elicit is not None and viewer.elicit is not None  # an operator answers, whoever owns the turn
    answer = asyncio.run(operator.sample(request(said("ok?"))))
    assert answer.content.text == "yes"
    assert viewer.sample is None
    assert viewer.cannot_ask == (
        "sampling would spend this turn's model tokens, and vi may not start a turn (needs the agents.add_turn "
        "permission)"
    )


def test_a_url_elicitation_from_a_turn_is_declined_without_asking_anybody():
    caller = turn_caller(owner=make_user(username="op", role="operator"), conversation_id=3, model=RecordingModel(),
                         turn_id=1, attempt=1)  # fmt: skip
    params = types.ElicitRequestURLParams(mode="url", message="Sign in", url="https://x.example/", elicitation_id="e")
    answer = asyncio.run(caller.elicit(params, 10.0))
    assert answer.message == f"toolhub declined the elicitation: {CANNOT_ELICIT_URL}."
