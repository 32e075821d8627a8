"""Whether full turns with the builtin model do what a routing case asks: call the tool, or ask for its value.

A case (routing_dev.jsonl's format) is a domain case when a tool it expects
(`includes`, `includes_any`, `also_any`) belongs to that domain by its policy;
those tools are the case's expected tools. The turn passes when it calls an
expected tool with arguments the tool's schema accepts, or asks (a question
naming the tool) for a required value of an expected tool by the value's name,
one the request does not hold in the form the schema wants. Each turn runs in a transaction
that is rolled back; its tool calls run for real (MCP tools on their servers).
Never fitted to the cases: it reads what the turn did, nothing else.
"""

import json
import re
from collections import defaultdict
from dataclasses import dataclass

import jsonschema
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings

from agents.models import Conversation, Message
from agents.turns import runtime
from agents.turns.start import create_turn
from catalog.models import Tool

EXPECTATION_KEYS = ("includes", "includes_any", "also_any")
EVAL_USER = "demo-eval"


@dataclass(frozen=True)
class CaseResult:
    id: str
    lang: str
    query: str
    expected: tuple[str, ...]
    called: tuple[tuple[str, dict], ...]
    answer: str
    passed: bool
    how: str  # "called", "asked" or why it missed


def domain_cases(cases: list[dict], domain: str) -> list[tuple[dict, tuple[str, ...]]]:
    """(case, its expected tools of `domain`) for each case expecting a tool whose policy names the domain."""
    wanted = {name for case in cases for name in _expected(case)}
    in_domain = set(Tool.objects.filter(name__in=wanted, policy__domains__name=domain).values_list("name", flat=True))
    chosen = []
    for case in cases:
        expected = tuple(name for name in _expected(case) if name in in_domain)
        if expected:
            chosen.append((case, expected))
    return chosen


def _expected(case: dict) -> list[str]:
    expect = case.get("expect") or {}
    return list(dict.fromkeys(name for key in EXPECTATION_KEYS for name in expect.get(key) or ()))


def run_case(case: dict, expected: tuple[str, ...], schemas: dict[str, dict]) -> CaseResult:
    """One full turn with the builtin model, judged, then rolled back."""
    with override_settings(TOOLHUB_MODEL_PROVIDER="builtin"), transaction.atomic():
        owner, _ = get_user_model().objects.get_or_create(username=EVAL_USER)
        conversation = Conversation.objects.create(owner=owner)
        turn = create_turn(conversation, case["query"])
        runtime.run_turn(turn.id)
        messages = list(Message.objects.filter(turn=turn).order_by("id"))
        transaction.set_rollback(True)
    called = tuple(
        (call["function"]["name"], _arguments(call["function"].get("arguments")))
        for message in messages
        for call in message.tool_calls or []
    )
    answers = [m.content for m in messages if m.role == Message.Role.ASSISTANT and m.content]
    answer = answers[-1] if answers else ""
    how = judge(case["query"], expected, called, answer, schemas)
    return CaseResult(str(case["id"]), case.get("lang", "?"), case["query"], expected, called, answer,
                      how in ("called", "asked"), how)  # fmt: skip


def judge(query: str, expected: tuple[str, ...], called, answer: str, schemas: dict[str, dict]) -> str:
    for name, arguments in called:
        if name in expected and isinstance(arguments, dict) and _valid(arguments, schemas.get(name) or {}):
            return "called"
    if "?" in answer:
        for name in (name for name in expected if re.search(rf"\b{re.escape(name)}\b", answer)):
            for value in _asked_values(schemas.get(name) or {}, answer):
                if not _stated(query, (schemas[name].get("properties") or {}).get(value) or {}):
                    return "asked"
    calls = ", ".join(name for name, _ in called) or "no tool"
    return f"called {calls}; asked for none of {', '.join(expected)}'s required values"


def _valid(arguments: dict, schema: dict) -> bool:
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return next(iter(validator.iter_errors(arguments)), None) is None


def _asked_values(schema: dict, answer: str) -> list[str]:
    """The tool's required values the answer names (a nested one by its top-level name or its dotted path)."""
    return [name for name in schema.get("required") or [] if re.search(rf"(?<![\w.]){re.escape(name)}\b", answer)]


def _stated(query: str, prop: dict) -> bool:
    """Whether the request holds a value of the form the schema wants (then asking for it is not asking)."""
    pattern = prop.get("pattern")
    if not pattern:
        return False
    body = pattern.removeprefix("^").removesuffix("$")
    try:
        return re.search(rf"(?<![\w-])(?:{body})(?![\w-])", query) is not None and not re.fullmatch(pattern, "the")
    except re.error:
        return False


def _arguments(raw):
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def summary(results: list[CaseResult]) -> dict:
    per_lang = defaultdict(lambda: [0, 0])
    for result in results:
        per_lang[result.lang][0] += result.passed
        per_lang[result.lang][1] += 1
    passed = sum(result.passed for result in results)
    return {
        "cases": len(results),
        "passed": passed,
        "rate": round(passed / len(results), 3) if results else 0.0,
        "called": sum(result.how == "called" for result in results),
        "asked": sum(result.how == "asked" for result in results),
        "per_lang": {
            lang: {"cases": n, "passed": p, "rate": round(p / n, 3)} for lang, (p, n) in sorted(per_lang.items())
        },  # fmt: skip
    }
