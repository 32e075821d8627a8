"""The builtin offline model: deterministic and rule-based, labelled as such everywhere.

Step one calls the tool the steward recommends first (a workflow's step tool
before it) with the arguments read from the request by the tool's JSON schema
(arguments.py), plus the other recommended read-only tools whose arguments the
request states; when a required value is missing it asks for that value by
name and calls nothing: it never invents one. A reply to its question
continues the request it asked about (agents.providers.followups). Step two composes the
answer from the tool results (a sentence each), or, when no tool ran, from the
knowledge snippets. A risky tool's call waits for approval like any model's.
It says plainly what it cannot do; it never pretends to know.

An API client's own tools are called only when the client forces it (tool_choice "required" or a named
function), filled the same way; tool_choice "none" calls nothing; parallel_tool_calls false calls one tool a step.
"""

import json
import uuid
from collections.abc import Iterator

from django.conf import settings

from agents.providers.base import BUILTIN_LABEL, BUILTIN_MODEL_ID, ModelChunk, ToolCall, TurnHints
from agents.providers.followups import continued_requests
from agents.providers.tracing import traced

from .arguments import Filled, Request, client_arguments, fill_arguments  # noqa: F401 (client_arguments: API)
from .summaries import describe, question_for

LABEL = BUILTIN_LABEL
PROVIDER_NAME = "toolhub.builtin"  # gen_ai.provider.name of its spans: no vendor's model


def _results_of_this_turn(messages: list[dict]) -> list[tuple[str, object]]:
    """(tool name, parsed result) for the tool results after the last user message."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    names = {}
    results = []
    for message in messages[last_user + 1 :]:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
        if message["role"] == "tool":
            try:
                content = json.loads(message["content"])
            except (TypeError, ValueError):
                content = message["content"]
            results.append((names.get(message["tool_call_id"], "?"), content))
    return results


def _called_this_turn(messages: list[dict]) -> list[str]:
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    return [call["function"]["name"] for m in messages[last_user + 1 :] for call in m.get("tool_calls") or []]


class BuiltinProvider:
    name = "builtin"
    label = LABEL

    def stream(
        self,
        messages: list[dict],
        tools: list[dict],
        *,
        hints: TurnHints,
        tool_choice=None,
        parallel_tool_calls=None,
        max_tokens: int | None = None,  # its rule-based answers are short; a sampling caller cuts them itself
    ) -> Iterator[ModelChunk]:
        return traced(self._stream(messages, tools, hints=hints, tool_choice=tool_choice,
                                   parallel_tool_calls=parallel_tool_calls),
                      provider=PROVIDER_NAME, model=BUILTIN_MODEL_ID, messages=messages, tools=tools)  # fmt: skip

    def _stream(
        self, messages: list[dict], tools: list[dict], *, hints: TurnHints, tool_choice=None, parallel_tool_calls=None
    ) -> Iterator[ModelChunk]:
        parameters = {tool["function"]["name"]: tool["function"].get("parameters") or {} for tool in tools}
        request = Request(tuple(continued_requests(messages, hints.user_text)), hints.known_values)
        results = _results_of_this_turn(messages)
        if tool_choice == "none":
            yield from self._answer(results, [], hints)
            return
        if not results:
            forced = self._forced_client_call(parameters, hints, tool_choice, request)
            if forced is not None:
                yield from forced
                return
        plan = self._plan(parameters, hints, request, called=_called_this_turn(messages), results=results)
        if plan.calls:
            calls = plan.calls[:1] if parallel_tool_calls is False else plan.calls
            yield ModelChunk(tool_calls=tuple(calls), finish_reason="tool_calls")
            return
        yield from self._answer(results, plan.questions, hints)

    def _plan(self, parameters: dict, hints: TurnHints, request: Request, *, called: list[str], results) -> "_Plan":
        """This step's calls, or else the question for what the request's tool lacks.

        The first candidate (a workflow's step tool, else the steward's first recommendation) is the request;
        the other recommended tools join it when they only read and the request names what they need (or
        tell the time the steward asked for). A tool lacking a value is not called: its value is asked for.
        """
        if results:
            again = self._after_results(parameters, request, called=called, results=results)
            if again.calls or again.questions:
                return again
        candidates = [
            name for name in dict.fromkeys((*hints.step_tools, *hints.recommended_tools))
            if name in parameters and name not in hints.client_tools
        ]  # fmt: skip
        calls, questions = [], []
        for position, name in enumerate(candidates):
            main = position == 0
            if not (main or name in hints.read_only_tools) or name in called:
                continue
            filled = fill_arguments(parameters[name], request)
            if filled.missing:
                questions.append(question_for(name, filled.missing, parameters[name]))
            elif not results and (main or _names_values(filled, request) or name in answer_tools()):
                calls.append(_call(len(calls), name, filled))
        if not results and candidates and candidates[0] not in {call.name for call in calls}:
            calls = []  # the request's own tool lacks a value: ask first, answer the rest with it
        return _Plan(calls, questions[:1])

    def _after_results(self, parameters: dict, request: Request, *, called: list[str], results) -> "_Plan":
        """After a staged step recorded its type choice, the same tool again with the chosen type's fields."""
        name, result = results[-1]
        if not (isinstance(result, dict) and "chosen" in result) or name not in parameters or called.count(name) > 1:
            return _Plan([], [])
        filled = fill_arguments(parameters[name], request)
        if filled.missing:
            return _Plan([], [question_for(name, filled.missing, parameters[name])])
        return _Plan([_call(len(called), name, filled)], [])

    def _forced_client_call(self, parameters: dict, hints: TurnHints, tool_choice, request: Request):
        """A call of the client tool that tool_choice forces (named, or the first fillable one for "required"),
        or the question for its missing value; None when tool_choice forces nothing."""
        if isinstance(tool_choice, dict):
            targets = [tool_choice["function"]["name"]]
        elif tool_choice == "required":
            targets = list(hints.client_tools)
        else:
            return None
        asked = None
        for name in targets:
            filled = fill_arguments(parameters.get(name, {}), request)
            if not filled.missing:
                call = ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=json.dumps(filled.arguments))
                return [ModelChunk(tool_calls=(call,), finish_reason="tool_calls")]
            asked = asked or question_for(name, filled.missing, parameters.get(name, {}))
        if asked is None:
            return None
        return [ModelChunk(content=asked), ModelChunk(finish_reason="stop")]

    def _answer(self, results, questions: list[str], hints: TurnHints) -> Iterator[ModelChunk]:
        parts = [describe(tool, result) for tool, result in results]
        if not results and not questions:  # a tool's answer stands alone; without one, the knowledge base answers
            parts += [f"{snippet['text']} (source: {snippet['source']})" for snippet in hints.knowledge]
        if not parts and not questions:
            parts.append(
                "I am toolhub's builtin offline model (rule-based): I answer with tools and the knowledge base "
                "only, and none of them covers this request. Connect an OpenAI-compatible model "
                "(TOOLHUB_MODEL_BASE_URL) for general questions."
            )
        text = "\n\n".join([*parts, *questions])
        for start in range(0, len(text), 80):
            yield ModelChunk(content=text[start : start + 80])
        yield ModelChunk(finish_reason="stop")


def answer_tools() -> frozenset[str]:
    """Tools the steward recommends for an intent (time, real-time), not for a value the request names."""
    return frozenset((*settings.TOOLHUB_CLOCK_TOOLS, settings.TOOLHUB_WEB_SEARCH_TOOL))


def _names_values(filled: Filled, request: Request) -> bool:
    """Whether the request names a value the tool needs (neither the whole request as a search text nor an id
    the workflow kept counts)."""
    given = [*(text.strip()[:200] for text in request.texts), *request.known.values()]
    return any(value not in given for value in filled.arguments.values())


class _Plan:
    def __init__(self, calls: list[ToolCall], questions: list[str]):
        self.calls, self.questions = calls, questions


def _call(index: int, name: str, filled: Filled) -> ToolCall:
    return ToolCall(id=f"builtin_{uuid.uuid4().hex[:12]}_{index}", name=name, arguments=json.dumps(filled.arguments))
