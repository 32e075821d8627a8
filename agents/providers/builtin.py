"""The builtin offline model: deterministic and rule-based, labelled as such everywhere.

Step one calls the steward's recommended tools whose arguments it can read
from the request (an arithmetic expression, a city or IANA zone, a search
query). Step two composes the answer from the tool results, or, when no tool
ran, from the knowledge snippets. It says plainly what it cannot do; it never pretends to know.

An API client's own tools are called only when the client forces it (tool_choice "required" or a named
function), with the required arguments it can read from the request by their schema; when one is missing it
asks for it by name instead. tool_choice "none" calls nothing; parallel_tool_calls false calls one tool a step.
"""

import json
import re
import uuid
from collections.abc import Iterator

from django.conf import settings

from . import ModelChunk, ToolCall, TurnHints

LABEL = "builtin (offline, rule-based)"

EXPRESSION = re.compile(
    r"(?:(?:sqrt|cbrt|log10|log|ln|exp|sin|cos|tan|abs|round|min|max|floor|ceil|pi|of|[\d.,+\-*/×÷^()%\s]))+",
    re.IGNORECASE,
)
ZONE = re.compile(r"\b[A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?\b")
PLACE = re.compile(r"\b(?:in|at|ở|tại)\s+([A-Za-zÀ-ỹ][\w .'-]*?)\s*(?:[?.!,]|$| right now| now| today)", re.IGNORECASE)


def arithmetic_expression(text: str) -> str | None:
    candidates = [m.group(0).strip(" ,.?") for m in EXPRESSION.finditer(text)]
    candidates = [c for c in candidates if re.search(r"\d", c) or re.search(r"\bpi\b", c, re.IGNORECASE)]
    return max(candidates, key=len) if candidates else None


def place(text: str) -> str | None:
    zone = ZONE.search(text)
    if zone:
        return zone.group(0)
    found = PLACE.search(text)
    return found.group(1).strip() if found else None


def arguments_for(tool: str, text: str) -> dict | None:
    """The arguments this model can read from the request, or None when it cannot."""
    if tool == settings.TOOLHUB_CALCULATOR_TOOL:
        expression = arithmetic_expression(text)
        return {"expression": expression} if expression else None
    if tool in settings.TOOLHUB_CLOCK_TOOLS:
        where = place(text)
        return {"timezone": where} if where else {}
    if tool == settings.TOOLHUB_WEB_SEARCH_TOOL:
        return {"query": text.strip()[:300]}
    return None


NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
PLACE_FIELDS = frozenset({"location", "city", "place", "where", "timezone", "zone"})
TEXT_FIELDS = frozenset({"query", "q", "text", "question", "prompt", "input", "message", "search", "topic"})


def _read_value(name: str, schema: dict, text: str):
    """One parameter's value as the request states it, or None: never a guess."""
    if isinstance(schema.get("enum"), list):
        named = [o for o in schema["enum"] if isinstance(o, str) and re.search(rf"\b{re.escape(o)}\b", text, re.I)]
        return named[0] if len(named) == 1 else None
    kind = schema.get("type")
    if kind in ("integer", "number"):
        found = NUMBER.search(text)
        if found is None or (kind == "integer" and "." in found.group(0)):
            return None
        return int(found.group(0)) if kind == "integer" else float(found.group(0))
    if kind == "string":
        if schema.get("format") == "date":
            found = ISO_DATE.search(text)
            return found.group(0) if found else None
        if name.lower() in PLACE_FIELDS:
            return place(text)
        if name.lower() in TEXT_FIELDS:
            return text.strip()[:300]
    return None


def client_arguments(parameters: dict, text: str) -> tuple[dict, list[str]]:
    """(arguments for the required parameters read from `text`, names of those it could not read)."""
    properties = parameters.get("properties") or {}
    arguments, missing = {}, []
    for name in parameters.get("required") or []:
        value = _read_value(name, properties.get(name) or {}, text)
        if value is None:
            missing.append(name)
        else:
            arguments[name] = value
    return arguments, missing


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


def describe(tool: str, result) -> str:
    if isinstance(result, dict) and "error" in result:
        return str(result["error"])
    if tool == settings.TOOLHUB_CALCULATOR_TOOL and isinstance(result, dict) and "result" in result:
        return f"{result.get('expression', '')} = {result['result']}"
    if tool in settings.TOOLHUB_CLOCK_TOOLS and isinstance(result, dict):
        if "time" in result or "local_time" in result:
            return f"It is {result.get('local_time') or result.get('time')} in {result.get('timezone', 'UTC')}."
        if "date" in result:
            return f"Today is {result.get('weekday', '')} {result['date']} in {result.get('timezone', 'UTC')}."
    if tool == settings.TOOLHUB_WEB_SEARCH_TOOL and isinstance(result, dict) and "results" in result:
        lines = [f'Web results for "{result.get("query", "")}":']
        for item in result["results"]:
            lines.append(f"- {item.get('title', '')} ({item.get('url', '')}): {item.get('snippet', '')}")
        return "\n".join(lines) if result["results"] else "The web search found nothing."
    if isinstance(result, str):
        return result
    return f"{tool} returned: {json.dumps(result, ensure_ascii=False)[:1500]}"


class BuiltinProvider:
    name = "builtin"
    label = LABEL

    def stream(
        self, messages: list[dict], tools: list[dict], *, hints: TurnHints, tool_choice=None, parallel_tool_calls=None
    ) -> Iterator[ModelChunk]:
        loaded = {tool["function"]["name"] for tool in tools}
        results = _results_of_this_turn(messages)
        if not results and tool_choice != "none":
            forced = self._forced_client_call(tools, hints, tool_choice)
            if forced is not None:
                yield from forced
                return
            calls = []
            for index, tool in enumerate(hints.recommended_tools):
                arguments = arguments_for(tool, hints.user_text) if tool in loaded else None
                if arguments is not None:
                    calls.append(ToolCall(id=f"builtin_{index}", name=tool, arguments=json.dumps(arguments)))
            if calls:
                yield ModelChunk(tool_calls=tuple(calls[:1] if parallel_tool_calls is False else calls),
                                 finish_reason="tool_calls")  # fmt: skip
                return
        yield from self._answer(results, hints)

    def _forced_client_call(self, tools: list[dict], hints: TurnHints, tool_choice) -> list[ModelChunk] | None:
        """A call of the client tool that tool_choice forces (named, or the first fillable one for "required"),
        or the question for its missing value; None when tool_choice forces nothing."""
        if isinstance(tool_choice, dict):
            targets = [tool_choice["function"]["name"]]
        elif tool_choice == "required":
            targets = list(hints.client_tools)
        else:
            return None
        parameters = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
        asked = None
        for name in targets:
            arguments, missing = client_arguments(parameters.get(name, {}), hints.user_text)
            if not missing:
                call = ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=json.dumps(arguments))
                return [ModelChunk(tool_calls=(call,), finish_reason="tool_calls")]
            asked = asked or (name, missing)
        if asked is None:
            return None
        name, missing = asked
        question = f"To call {name} I need {', '.join(missing)}: please tell me the {missing[0]}."
        return [ModelChunk(content=question), ModelChunk(finish_reason="stop")]

    def _answer(self, results, hints: TurnHints) -> Iterator[ModelChunk]:
        parts = [describe(tool, result) for tool, result in results]
        if not results:  # a tool's answer stands alone; without one, the knowledge base answers
            parts += [f"{snippet['text']} (source: {snippet['source']})" for snippet in hints.knowledge]
        if not parts:
            parts.append(
                "I am toolhub's builtin offline model (rule-based): I answer with tools and the knowledge base "
                "only, and none of them covers this request. Connect an OpenAI-compatible model "
                "(TOOLHUB_MODEL_BASE_URL) for general questions."
            )
        skipped = [tool for tool in hints.recommended_tools if tool not in {t for t, _ in results}]
        if results and skipped:
            parts.append(f"I could not read the arguments for {', '.join(skipped)} from your message.")
        text = "\n\n".join(parts)
        for start in range(0, len(text), 80):
            yield ModelChunk(content=text[start : start + 80])
        yield ModelChunk(finish_reason="stop")
