"""The builtin tools the runtime runs in-process; a call never raises, every failure is an error ToolResult.

The runtime calls `run_builtin(name, arguments, emit=...)` with arguments
already validated against the tool's JSON schema (demo/data/builtin.py);
the tools still check what they use. `emit(phase, message, **data)` sends a
status event to the user (web_search announces its query with it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from agents.tools import calculator, clock, web

logger = logging.getLogger(__name__)

Emit = Callable[..., None]  # emit(phase: str, message: str, **data) -> None


@dataclass(frozen=True)
class ToolResult:
    content: object  # str or a JSON-serialisable dict/list
    is_error: bool = False


def _calculate(arguments: dict, emit: Emit) -> ToolResult:
    expression = arguments.get("expression")
    if not isinstance(expression, str):
        return ToolResult("calculate needs an expression, e.g. (1250000 * 0.08) + 15000.", is_error=True)
    try:
        value = calculator.evaluate(expression)
    except calculator.CalculationError as error:
        return ToolResult(f"Cannot calculate {expression.strip()[:100]!r}: {error}", is_error=True)
    return ToolResult({"expression": expression, "result": calculator.for_display(value)})


def _current_time(arguments: dict, emit: Emit) -> ToolResult:
    try:
        return ToolResult(clock.get_current_time(_optional_text(arguments, "timezone")))
    except clock.UnknownTimezone as error:
        return ToolResult(str(error), is_error=True)


def _current_date(arguments: dict, emit: Emit) -> ToolResult:
    try:
        return ToolResult(clock.get_current_date(_optional_text(arguments, "timezone")))
    except clock.UnknownTimezone as error:
        return ToolResult(str(error), is_error=True)


def _web_search(arguments: dict, emit: Emit) -> ToolResult:
    query = _optional_text(arguments, "query")
    if not query:
        return ToolResult("web_search needs a query.", is_error=True)
    max_results = arguments.get("max_results", web.DEFAULT_MAX_RESULTS)
    try:
        return ToolResult(web.web_search(query, max_results, emit=emit, arguments=arguments))
    except web.WebSearchError as error:
        return ToolResult(str(error), is_error=True)


def _dns_lookup(arguments: dict, emit: Emit) -> ToolResult:
    hostname = _optional_text(arguments, "hostname")
    if not hostname:
        return ToolResult("dns_lookup needs a hostname, e.g. shop.example.com.", is_error=True)
    try:
        return ToolResult(web.dns_lookup(hostname, _optional_text(arguments, "record_type") or "A"))
    except web.DnsLookupError as error:
        return ToolResult(str(error), is_error=True)


def _optional_text(arguments: dict, name: str) -> str | None:
    value = arguments.get(name)
    return value if isinstance(value, str) else None


_HANDLERS: dict[str, Callable[[dict, Emit], ToolResult]] = {
    "calculate": _calculate,
    "get_current_time": _current_time,
    "get_current_date": _current_date,
    "web_search": _web_search,
    "dns_lookup": _dns_lookup,
}
BUILTIN_TOOL_NAMES: frozenset[str] = frozenset(_HANDLERS)


def run_builtin(name: str, arguments: dict, *, emit: Emit) -> ToolResult:
    """Run builtin tool `name`; unknown names, bad arguments and unexpected failures become error results."""
    handler = _HANDLERS.get(name)
    if handler is None:
        known = ", ".join(sorted(BUILTIN_TOOL_NAMES))
        return ToolResult(f"Unknown builtin tool {name!r}; builtin tools are {known}.", is_error=True)
    if not isinstance(arguments, dict):
        return ToolResult(f"{name} needs its arguments as a JSON object.", is_error=True)
    try:
        return handler(arguments, emit)
    except Exception:  # a tool must never take the turn down; the traceback goes to the log
        logger.exception("builtin tool %s failed", name)
        return ToolResult(f"The {name} tool failed unexpectedly; try again or answer without it.", is_error=True)
