"""What an MCP server asks during a turn's tool call: sampling/createMessage, answered by the turn's own model
profile, and elicitation/create, asked of an operator in the console (agents.turns.questions).

Who may spend the profile's tokens: the turn's owner, while they may start turns (agents.access.abilities.START_TURN);
for anybody else the server is told so. What it may ask: text messages (an image or audio message is refused), at
most TOOLHUB_MCP_SAMPLING_MAX_TOKENS tokens of answer (the model is asked for that many, and a longer answer is cut
to it), and TOOLHUB_MCP_SAMPLING_PER_CALL requests per tool call (catalog.mcp_client.callers counts them). The model
gets the server's system prompt and messages only: nothing of the conversation, the catalog or toolhub's prompt.
An elicitation's form (already checked by catalog.mcp_client.callers.elicitation_problem) becomes a question on the
turn's conversation page and in the approvals inbox, for an operator who may approve tool calls to answer or decline
within what is left of the tool call's time (TOOLHUB_MCP_TIMEOUT), less ANSWER_MARGIN_SECONDS for the server to
finish; no answer in time is declined, a cancelled turn's question cancelled. A URL elicitation is not asked
(CANNOT_ELICIT_URL).
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types

from agents.access.abilities import START_TURN, refusal
from agents.providers import ModelUnavailable, Provider, TurnHints
from catalog.mcp_client.callers import Caller, ElicitAnswer, SampleAnswer, sampling_max_tokens
from catalog.models.tokens import encoding

from . import questions

CANNOT_ELICIT_URL = (
    "this tool call runs in a chat turn, where toolhub asks an operator form elicitations only, not URL ones: "
    "call the tool through /mcp with a client that accepts URL elicitations"
)
ANSWER_MARGIN_SECONDS = 2.0  # of the tool call's time, left for the server to read the answer and finish the call


def turn_caller(*, owner: Any, conversation_id: int, model: Provider, turn_id: int, attempt: int) -> Caller:
    """Who a turn's MCP tool calls are made for: its conversation's owner, the conversation as the session, the
    turn's model for sampling when the owner may spend it, and an operator for elicitation (the run `attempt` of
    turn `turn_id` waits for the answer)."""
    elicit = ask_operator(turn_id=turn_id, attempt=attempt)
    refused = refusal(owner, START_TURN)
    if refused is not None:
        reason = f"sampling would spend this turn's model tokens, and {refused.message[0].lower()}{refused.message[1:]}"
        return Caller(user_id=getattr(owner, "pk", None), session_key=f"conversation:{conversation_id}",
                      elicit=elicit, cannot_ask=reason.rstrip("."))  # fmt: skip
    return Caller(user_id=owner.pk, session_key=f"conversation:{conversation_id}", sample=answer_with(model),
                  elicit=elicit)  # fmt: skip


def ask_operator(*, turn_id: int, attempt: int) -> ElicitAnswer:
    """The Caller.elicit of a turn: a question to the operator (agents.turns.questions), waited for on the MCP
    client's loop without holding it (the database is read in worker threads), and its outcome as the server's
    ElicitResult."""

    async def elicit(params: types.ElicitRequestParams, seconds: float) -> types.ElicitResult | types.ErrorData:
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ErrorData(code=types.INVALID_REQUEST,
                                   message=f"toolhub declined the elicitation: {CANNOT_ELICIT_URL}.")  # fmt: skip
        outcome = await questions.ask_and_wait(turn_id=turn_id, attempt=attempt, message=params.message,
                                               schema=params.requested_schema,
                                               seconds=max(seconds - ANSWER_MARGIN_SECONDS, 0.5))  # fmt: skip
        if outcome.action == "accept":
            return types.ElicitResult(action="accept", content=outcome.content)
        return types.ElicitResult(action="decline" if outcome.action == "decline" else "cancel")

    return elicit


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
