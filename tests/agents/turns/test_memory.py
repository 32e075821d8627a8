"""Memory fits a conversation to a budget by evicting whole turns: table tests and hypothesis properties."""

import copy
import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from agents.models import ModelProfile
from agents.turns.memory import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    BudgetExceeded,
    EvictionResult,
    InvalidTranscript,
    budget,
    conversation_tokens,
    evict_whole_turns,
    message_tokens,
    split_turns,
    validate_transcript,
)
from catalog.models.tokens import count_json_tokens, count_tokens

# --- small builders ------------------------------------------------------------------------------


def system(text="You are toolhub's assistant."):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text=None, *call_ids):
    message = {"role": "assistant", "content": text}
    if call_ids:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}}
            for call_id in call_ids
        ]
    return message


def tool(call_id, text="result"):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def turn(number, *, calls=0):
    ids = [f"call_{number}_{k}" for k in range(calls)]
    steps = [assistant(None, *ids), *(tool(i, f"result {i}") for i in ids)] if ids else []
    return [user(f"question {number}"), *steps, assistant(f"answer {number}")]


def transcript(*turns):
    return [system(), *(m for t in turns for m in t)]


def tokens_of(messages):
    return sum(message_tokens(m) for m in messages)


# --- message_tokens and budget -------------------------------------------------------------------


def test_message_tokens_count_framing_role_and_content():
    assert message_tokens(user("hello world")) == MESSAGE_OVERHEAD_TOKENS + count_tokens("user") + 2
    assert message_tokens({"role": "assistant", "content": None}) == 3 + count_tokens("assistant")


def test_message_tokens_count_tool_calls_and_tool_call_id():
    call = assistant(None, "call_1")
    assert message_tokens(call) == 3 + count_tokens("assistant") + count_json_tokens(call["tool_calls"])
    assert message_tokens(tool("call_1", "")) == 3 + count_tokens("tool") + count_tokens("call_1")


def test_message_tokens_reject_non_text_content():
    with pytest.raises(TypeError):
        message_tokens({"role": "user", "content": [{"type": "text", "text": "hi"}]})


def test_budget_is_the_window_minus_system_tools_output_and_reserved_results():
    profile = SimpleNamespace(context_window=8192, max_output_tokens=1024, reserved_result_tokens=2000)
    assert budget(profile, system_tokens=500, tool_tokens=1200) == 8192 - 500 - 1200 - 1024 - 2000


def test_budget_may_be_negative():
    profile = SimpleNamespace(context_window=4096, max_output_tokens=2048, reserved_result_tokens=1024)
    assert budget(profile, system_tokens=800, tool_tokens=600) == -376


def test_budget_reads_an_unsaved_model_profile():
    profile = ModelProfile(name="small", context_window=32768, max_output_tokens=4096, reserved_result_tokens=4096)
    assert budget(profile, system_tokens=0, tool_tokens=0) == 24576


# --- split_turns ---------------------------------------------------------------------------------


def test_split_turns_groups_each_user_message_with_what_answered_it():
    first, second = turn(1, calls=2), turn(2)
    assert split_turns(transcript(first, second)) == [first, second]


def test_split_turns_puts_messages_before_the_first_user_message_in_a_leading_pseudo_turn():
    greeting = assistant("Hi, how can I help?")
    messages = [system(), system("Policy: be brief."), greeting, *turn(1)]
    assert split_turns(messages) == [[greeting], turn(1)]


def test_split_turns_of_only_system_messages_is_empty():
    assert split_turns([system()]) == []
    assert split_turns([]) == []


def test_split_turns_refuses_a_system_message_after_the_start():
    with pytest.raises(InvalidTranscript, match="only at the start"):
        split_turns([system(), *turn(1), system("late"), *turn(2)])


# --- evict_whole_turns ---------------------------------------------------------------------------


def test_everything_is_kept_when_it_fits():
    messages = transcript(turn(1, calls=1), turn(2))
    result = evict_whole_turns(messages, budget=10_000)
    assert result == EvictionResult(messages, 0, 0, conversation_tokens(messages))


def test_eviction_removes_the_oldest_whole_turns_and_keeps_system_and_newest():
    turns = [turn(1, calls=3), turn(2, calls=1), turn(3), turn(4, calls=2)]
    messages = transcript(*turns)
    # Room for exactly the last two turns: the first two must go, tool calls and results with them.
    room = tokens_of(turns[2]) + tokens_of(turns[3]) + REPLY_PRIMING_TOKENS
    result = evict_whole_turns(messages, budget=room)
    assert result.messages == [system(), *turns[2], *turns[3]]
    assert result.evicted_turns == 2
    assert result.evicted_tokens == tokens_of(turns[0]) + tokens_of(turns[1])
    assert result.tokens == room
    validate_transcript(result.messages)


def test_eviction_stops_as_soon_as_the_conversation_fits():
    turns = [turn(1), turn(2), turn(3)]
    room = tokens_of(turns[1]) + tokens_of(turns[2]) + REPLY_PRIMING_TOKENS
    assert evict_whole_turns(transcript(*turns), budget=room - 1).evicted_turns == 2
    assert evict_whole_turns(transcript(*turns), budget=room).evicted_turns == 1


def test_the_leading_pseudo_turn_is_evicted_first():
    greeting = assistant("Hi, how can I help?")
    messages = [system(), greeting, *turn(1), *turn(2)]
    room = conversation_tokens(messages) - 1
    result = evict_whole_turns(messages, budget=room)
    assert result.messages == [system(), *turn(1), *turn(2)]
    assert result.evicted_turns == 1


def test_budget_exceeded_when_the_newest_turn_alone_does_not_fit():
    newest = turn(2, calls=3)
    needed = tokens_of(newest) + REPLY_PRIMING_TOKENS
    with pytest.raises(BudgetExceeded) as raised:
        evict_whole_turns(transcript(turn(1), newest), budget=needed - 1)
    assert (raised.value.needed, raised.value.available) == (needed, needed - 1)
    assert str(needed) in str(raised.value) and "never cut" in str(raised.value)
    assert evict_whole_turns(transcript(turn(1), newest), budget=needed).evicted_turns == 1


def test_budget_exceeded_for_a_negative_budget():
    with pytest.raises(BudgetExceeded):
        evict_whole_turns(transcript(turn(1)), budget=-10)


def test_eviction_does_not_modify_its_input():
    messages = transcript(turn(1, calls=2), turn(2))
    before = copy.deepcopy(messages)
    evict_whole_turns(messages, budget=tokens_of(turn(2)) + REPLY_PRIMING_TOKENS)
    assert messages == before


# --- validate_transcript -------------------------------------------------------------------------


def test_a_valid_transcript_passes():
    validate_transcript(transcript(turn(1, calls=2), turn(2), turn(3, calls=1)))
    validate_transcript([system(), assistant("Hi"), *turn(1)])


@pytest.mark.parametrize(
    "messages, reason",
    [
        ([system(), user("q"), tool("call_x")], "answers no open tool call"),
        ([system(), user("q"), assistant(None, "a"), tool("a"), tool("b")], "answers no open tool call"),
        ([system(), user("q"), assistant(None, "a"), tool("a"), user("q2"), tool("a")], "answers no open tool call"),
        ([system(), user("q"), assistant(None, "a"), tool("a"), tool("a")], "more than once"),
        ([system(), user("q"), {"role": "tool", "content": "r"}], "needs the tool_call_id"),
    ],
    ids=["orphan", "unknown-id", "result-in-a-later-turn", "answered-twice", "no-tool-call-id"],
)
def test_orphan_and_duplicate_tool_results_are_rejected(messages, reason):
    with pytest.raises(InvalidTranscript, match=reason):
        validate_transcript(messages)


@pytest.mark.parametrize(
    "messages",
    [
        [system(), user("q"), assistant(None, "a", "b"), tool("a")],
        [system(), user("q"), assistant(None, "a"), user("q2"), assistant("done")],
        [system(), user("q"), assistant(None, "a"), assistant(None, "b"), tool("a"), tool("b")],
    ],
    ids=["at-the-end", "before-the-next-user", "before-new-calls"],
)
def test_unanswered_tool_calls_are_rejected(messages):
    with pytest.raises(InvalidTranscript, match="have no result"):
        validate_transcript(messages)


@pytest.mark.parametrize(
    "messages, reason",
    [
        ([system(), user("q"), system("late")], "only at the start"),
        ([system(), {"role": "robot", "content": "x"}], "unknown role"),
        ([system(), {**user("q"), "tool_calls": assistant(None, "a")["tool_calls"]}], "only assistant"),
        ([system(), user("q"), assistant(None, "a", "a"), tool("a")], "repeat"),
    ],
    ids=["late-system", "unknown-role", "user-with-tool-calls", "repeated-call-id"],
)
def test_malformed_transcripts_are_rejected(messages, reason):
    with pytest.raises(InvalidTranscript, match=reason):
        validate_transcript(messages)


# --- properties over random valid conversations --------------------------------------------------

contents = st.text(max_size=120)


@st.composite
def conversations(draw):
    messages = [system(draw(contents))]
    for number in range(draw(st.integers(1, 6))):
        messages.append(user(draw(contents)))
        for step in range(draw(st.integers(0, 3))):
            ids = [f"call_{number}_{step}_{k}" for k in range(draw(st.integers(0, 3)))]
            call = {"role": "assistant", "content": draw(st.one_of(st.none(), contents))}
            if ids:
                call["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"q": draw(contents)})},
                    }
                    for call_id in ids
                ]
            messages.append(call)
            messages.extend(tool(call_id, draw(contents)) for call_id in ids)
        messages.append(assistant(draw(contents)))
    return messages


@st.composite
def conversations_and_budgets(draw):
    messages = draw(conversations())
    total = conversation_tokens(messages)
    newest = tokens_of(split_turns(messages)[-1]) + REPLY_PRIMING_TOKENS
    # Half the budgets land where the newest turn fits, so eviction itself is exercised, not just the error.
    return messages, draw(st.one_of(st.integers(-20, total + 20), st.integers(newest, total)))


@hypothesis_settings(max_examples=200, deadline=None)
@given(conversations())
def test_generated_conversations_are_valid_transcripts(messages):
    validate_transcript(messages)
    assert [m for t in split_turns(messages) for m in t] == messages[1:]


@hypothesis_settings(max_examples=200, deadline=None)
@given(conversations_and_budgets())
def test_eviction_keeps_a_valid_fitting_suffix_of_whole_turns(case):
    messages, room = case
    original = copy.deepcopy(messages)
    turns = split_turns(messages)
    newest_needed = tokens_of(turns[-1]) + REPLY_PRIMING_TOKENS
    try:
        result = evict_whole_turns(messages, budget=room)
    except BudgetExceeded as exceeded:
        assert newest_needed > room
        assert (exceeded.needed, exceeded.available) == (newest_needed, room)
        return
    assert messages == original
    validate_transcript(result.messages)
    assert result.messages[0] == messages[0] and result.messages[0]["role"] == "system"
    assert result.tokens == conversation_tokens(result.messages) <= room
    kept = split_turns(result.messages)
    assert kept == turns[len(turns) - len(kept) :]
    assert kept[-1] == turns[-1] and all(a is b for a, b in zip(kept[-1], turns[-1], strict=True))
    assert result.evicted_turns == len(turns) - len(kept)
    assert result.evicted_tokens + result.tokens == conversation_tokens(messages)
    if result.evicted_turns:  # only as many turns as needed were removed
        assert result.tokens + tokens_of(turns[result.evicted_turns - 1]) > room
