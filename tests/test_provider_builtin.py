"""The builtin offline model's answers: a tool's result stands alone; without one, the knowledge base answers."""

import json

from agents.providers import TurnHints
from agents.providers.builtin import BuiltinProvider

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
