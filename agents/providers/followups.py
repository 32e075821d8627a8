"""A short reply to the assistant's question continues the request the question was about.

"Show the points balance" -> "Which member_id?" -> "mem_lan00001": the last
message alone names no tool; with the request it answers, it does. The steward
routes, and the builtin model fills arguments from, the chain of user messages
linked this way. Pure functions over chat messages; never reads the database.
"""

import re

MAX_REPLY_WORDS = 12  # a longer message is a request of its own, even after a question
MAX_CHAIN = 3


def continued_requests(messages: list[dict], newest: str | None = None) -> list[str]:
    """The user texts the newest user message continues, oldest first, ending with the newest (or `newest`)."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return [newest] if newest else []
    texts = [newest if newest is not None else messages[users[-1]].get("content") or ""]
    position = len(users) - 1
    while position > 0 and len(texts) < MAX_CHAIN:
        reply_to = _assistant_text(messages[users[position - 1] + 1 : users[position]])
        if not reply_to.rstrip().endswith("?") or len(re.findall(r"\w+", texts[0])) > MAX_REPLY_WORDS:
            break
        position -= 1
        texts.insert(0, messages[users[position]].get("content") or "")
    return texts


def _assistant_text(between: list[dict]) -> str:
    """The assistant's last words between two user messages (its final answer, not a tool-calling step)."""
    for message in reversed(between):
        if message.get("role") == "assistant" and message.get("content"):
            return message["content"]
    return ""
