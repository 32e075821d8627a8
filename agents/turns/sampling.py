"""An MCP server's sampling/createMessage during a turn's tool call, answered by the turn's own model profile.

Who may spend the profile's tokens: the turn's owner, while they may start turns (agents.access.abilities.START_TURN);
for anybody else the server is told so. What it may ask: text messages (an image or audio message is refused), at
most TOOLHUB_MCP_SAMPLING_MAX_TOKENS tokens of answer (the model is asked for that many, and a longer answer is cut
to it), and TOOLHUB_MCP_SAMPLING_PER_CALL requests per tool call (catalog.mcp_client.callers counts them). The model
gets the server's system prompt and messages only: nothing of the conversation, the catalog or toolhub's prompt.
Elicitation from a turn is not relayed (nobody answers it yet): the server is told "not supported for this caller".
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types

from agents.access.abilities import START_TURN, refusal
from agents.providers import ModelUnavailable, Provider, TurnHints
from catalog.mcp_client.callers import Caller, SampleAnswer, sampling_max_tokens
from catalog.models.tokens import encoding

CANNOT_ELICIT = (
    "this tool call runs in a chat turn, and toolhub does not relay a server's elicitation requests from a turn "
    "(not supported for this caller): call the tool through /mcp with a client that declares elicitation"
)


def turn_caller(*, owner: Any, conversation_id: int, model: Provider) -> Caller:
    """Who a turn's MCP tool calls are made for: its conversation's owner, the conversation as the session, and
    the turn's model for sampling when the owner may spend it."""
    refused = refusal(owner, START_TURN)
    if refused is not None:
        reason = f"sampling would spend this turn's model tokens, and {refused.message[0].lower()}{refused.message[1:]}"
        return Caller(user_id=getattr(owner, "pk", None), session_key=f"conversation:{conversation_id}",
                      cannot_ask=reason.rstrip("."))  # fmt: skip
    return Caller(user_id=owner.pk, session_key=f"conversation:{conversation_id}", sample=answer_with(model),
                  cannot_ask=CANNOT_ELICIT)  # fmt: skip


def answer_with(model: Provider) -> SampleAnswer:
    """The Caller.sample of a turn: runs `model` off the MCP client's loop (it blocks) and answers the server."""

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        return await asyncio.to_thread(complete, model, params)

    return sample


def chat_messages(params: types.CreateMessageRequestParams) -> list[dict[str, str]] | str:
    """The sampling request as chat messages, or why it cannot be (a message that is not text)."""
    messages: list[dict[str, str]] = []
    if params.system_prompt:
        messages.append({"role": "system", "content": params.system_prompt})
    for message in params.messages:
        content = message.content
        if not isinstance(content, types.TextContent):
            return f"a {getattr(content, 'type', type(content).__name__)} message (toolhub samples text only)"
        messages.append({"role": message.role, "content": content.text})
    return messages


def complete(model: Provider, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
    """One completion of the turn's model for the server (blocking)."""
    messages = chat_messages(params)
    if isinstance(messages, str):
        return types.ErrorData(code=types.INVALID_PARAMS, message=f"toolhub declined the sampling request: {messages}.")
    most = min(params.max_tokens, sampling_max_tokens())
    try:
        text = "".join(chunk.content for chunk in model.stream(messages, [], hints=TurnHints(), max_tokens=most))
    except ModelUnavailable as exc:
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"The turn's model could not answer: {exc}.")
    tokens = encoding().encode(text, disallowed_special=())
    cut = len(tokens) > most
    if cut:
        text = encoding().decode(tokens[:most])
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                     model=model.label, stop_reason="maxTokens" if cut else "endTurn")  # fmt: skip
