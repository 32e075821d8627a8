"""Fit a conversation to a token budget by evicting whole turns, oldest first; never cut inside a turn, never reorder.

Messages are plain dicts in the OpenAI chat format. Token accounting follows
OpenAI's cookbook ("How to count tokens with tiktoken"): every message costs
3 tokens of framing plus its fields, and every request costs 3 more tokens
that prime the assistant's reply.

Who counts what, so nothing is counted twice or not at all:

- The caller counts the leading system message(s) in ``system_tokens`` (use
  ``message_tokens`` on each so the framing is included) and the tool schemas
  in ``tool_tokens``; ``budget`` subtracts both from the window.
- The budget then applies to the conversation: every non-system message plus
  the reply priming (``conversation_tokens``). ``evict_whole_turns`` checks
  exactly that number against the budget and reports it as ``tokens``.
"""

from dataclasses import dataclass
from typing import Any, Protocol

from catalog.models.tokens import count_json_tokens, count_tokens

MESSAGE_OVERHEAD_TOKENS = 3  # cookbook: <|start|>{role/name}\n{content}<|end|>
NAME_TOKENS = 1  # cookbook: a "name" field costs one token more
REPLY_PRIMING_TOKENS = 3  # cookbook: every reply is primed with <|start|>assistant<|message|>

SYSTEM, USER, ASSISTANT, TOOL = "system", "user", "assistant", "tool"
ROLES = frozenset({SYSTEM, USER, ASSISTANT, TOOL})


# One message in the OpenAI chat format: role and content, and by role tool_calls, tool_call_id or name.
ChatMessage = dict[str, Any]


class TokenLimits(Protocol):
    """What `budget` reads of a model profile (agents.models.ModelProfile has it)."""

    @property
    def context_window(self) -> int: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def reserved_result_tokens(self) -> int: ...


class InvalidTranscript(ValueError):
    """The messages are not a transcript a model provider would accept."""


class BudgetExceeded(Exception):
    """Even the newest turn alone does not fit the budget; the caller must fail the turn, not truncate it."""

    def __init__(self, needed: int, available: int):
        self.needed = needed
        self.available = available
        super().__init__(
            f"the newest turn needs {needed} tokens but the conversation budget is {available} tokens; "
            "whole turns are never cut, so this request cannot be sent to this model"
        )


@dataclass(frozen=True)
class EvictionResult:
    messages: list[ChatMessage]  # leading system message(s), then the kept turns in their original order
    evicted_turns: int
    evicted_tokens: int  # message tokens of the evicted turns
    tokens: int  # conversation_tokens(messages): what was checked against the budget


def message_tokens(message: ChatMessage) -> int:
    """Tokens of one message as sent: framing, role, content, name, tool_call_id and serialized tool calls.

    Tool calls are counted as their canonical JSON; providers render them in
    their own template, so this is a close, stable estimate for that part.
    """
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content must be a string or None, not {type(content).__name__}")
    tokens = MESSAGE_OVERHEAD_TOKENS + count_tokens(message.get("role") or "") + count_tokens(content or "")
    if message.get("name"):
        tokens += NAME_TOKENS + count_tokens(message["name"])
    if message.get("tool_call_id"):
        tokens += count_tokens(message["tool_call_id"])
    if message.get("tool_calls"):
        tokens += count_json_tokens(message["tool_calls"])
    return tokens


def conversation_tokens(messages: list[ChatMessage]) -> int:
    """What the budget is checked against: every non-system message plus the reply priming."""
    return sum(message_tokens(m) for m in messages if m.get("role") != SYSTEM) + REPLY_PRIMING_TOKENS


def budget(profile: TokenLimits, *, system_tokens: int, tool_tokens: int) -> int:
    """Tokens left for the conversation on this model; may be negative.

    The design's "reserved result/response tokens" are
    ``profile.max_output_tokens`` (the model's reply) plus
    ``profile.reserved_result_tokens`` (room for tool results). ``profile`` is
    any object with those attributes and ``context_window``.
    """
    return (
        profile.context_window
        - system_tokens
        - tool_tokens
        - profile.max_output_tokens
        - profile.reserved_result_tokens
    )


def _leading_system_count(messages: list[ChatMessage]) -> int:
    count = 0
    while count < len(messages) and messages[count].get("role") == SYSTEM:
        count += 1
    return count


def split_turns(messages: list[ChatMessage]) -> list[list[ChatMessage]]:
    """The conversation's turns in order: each a user message and everything that answered it.

    Leading system messages belong to no turn. Messages before the first user
    message (a greeting, say) form a leading pseudo-turn, evicted first. A
    system message anywhere else raises InvalidTranscript rather than being
    silently folded into a turn that eviction could drop.
    """
    start = _leading_system_count(messages)
    turns: list[list[ChatMessage]] = []
    for index, message in enumerate(messages[start:], start):
        role = message.get("role")
        if role == SYSTEM:
            raise InvalidTranscript(f"message {index}: system messages are allowed only at the start")
        if role == USER or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def evict_whole_turns(messages: list[ChatMessage], *, budget: int) -> EvictionResult:
    """Drop the oldest whole turns until the conversation fits ``budget``; keep the system message(s) and newest turn.

    Removes only as many turns as needed. ``budget`` is for the conversation
    (see ``conversation_tokens``); system messages are already paid for by the
    caller's ``system_tokens``. Raises BudgetExceeded when the newest turn
    alone does not fit. The input list and its dicts are not modified.
    """
    system = messages[: _leading_system_count(messages)]
    turns = split_turns(messages)
    sizes = [sum(message_tokens(m) for m in turn) for turn in turns]
    total = sum(sizes) + REPLY_PRIMING_TOKENS
    newest = (sizes[-1] if sizes else 0) + REPLY_PRIMING_TOKENS
    if newest > budget:
        raise BudgetExceeded(needed=newest, available=budget)
    evicted = 0
    while total > budget:  # stops before the newest turn: it fits on its own
        total -= sizes[evicted]
        evicted += 1
    kept = [message for turn in turns[evicted:] for message in turn]
    return EvictionResult(
        messages=[*system, *kept],
        evicted_turns=evicted,
        evicted_tokens=sum(sizes[:evicted]),
        tokens=total,
    )


def _tool_call_ids(index: int, message: ChatMessage) -> list[str]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise InvalidTranscript(f"message {index}: tool_calls must be a list")
    ids = []
    for call in calls:
        if not isinstance(call, dict) or not call.get("id"):
            raise InvalidTranscript(f"message {index}: every tool call needs an id")
        if not (call.get("function") or {}).get("name"):
            raise InvalidTranscript(f"message {index}: tool call {call['id']!r} has no function name")
        ids.append(call["id"])
    if len(set(ids)) != len(ids):
        raise InvalidTranscript(f"message {index}: tool call ids repeat within one assistant message")
    return ids


def validate_transcript(messages: list[ChatMessage]) -> None:
    """Raise InvalidTranscript unless every tool call is answered exactly once, in its turn, and no result is orphaned.

    A batch of tool calls stays open until the next user message or the next
    assistant message with new tool calls; each call must be answered by
    exactly one tool message before then. System messages only at the start.
    """
    open_calls: dict[str, bool] = {}  # call id -> answered, for the current batch
    opened_at = 0

    def close_batch(at: str) -> None:
        unanswered = [call_id for call_id, answered in open_calls.items() if not answered]
        if unanswered:
            raise InvalidTranscript(
                f"message {opened_at}: tool call(s) {', '.join(map(repr, unanswered))} have no result before {at}"
            )
        open_calls.clear()

    start = _leading_system_count(messages)
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise InvalidTranscript(f"message {index}: unknown role {role!r}")
        if role == SYSTEM:
            if index >= start:
                raise InvalidTranscript(f"message {index}: system messages are allowed only at the start")
        elif role != ASSISTANT and message.get("tool_calls"):
            raise InvalidTranscript(f"message {index}: only assistant messages carry tool calls")
        elif role == USER:
            close_batch(f"the user message {index}")
        elif role == ASSISTANT and message.get("tool_calls"):
            ids = _tool_call_ids(index, message)
            close_batch(f"the assistant's new tool calls at message {index}")
            open_calls.update(dict.fromkeys(ids, False))
            opened_at = index
        elif role == TOOL:
            call_id = message.get("tool_call_id")
            if not call_id:
                raise InvalidTranscript(f"message {index}: a tool message needs the tool_call_id it answers")
            if call_id not in open_calls:
                raise InvalidTranscript(
                    f"message {index}: tool result {call_id!r} answers no open tool call of an earlier "
                    "assistant message in this turn"
                )
            if open_calls[call_id]:
                raise InvalidTranscript(f"message {index}: tool call {call_id!r} is answered more than once")
            open_calls[call_id] = True
    close_batch("the end of the transcript")
