"""One tool call of the model: checked against the bundle at call time, validated, executed, truncated.

An MCP tool's answer reaches the model as text (catalog.mcp_client.content.model_text:
non-text content summarised), cut to the result budget; the whole result, every
content block as sent, comes back beside it for the turn's record and /mcp.

A tool the bundle does not hold is refused with the reason; arguments that do
not match the schema are refused with the schema's message; missing required
arguments are to be asked of the user, never invented. tool_search loads
what it finds (only what policy allows) for the next step. Each call is a span (`execute`).
"""

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema
from django.conf import settings
from opentelemetry.trace import Span, StatusCode

from agents.providers import ToolCall
from agents.tools import BUILTIN_TOOL_NAMES, Emit, run_builtin
from agents.tools.results import truncate_result
from catalog.mcp_client.callers import Caller, calling_as
from catalog.mcp_client.client import McpCallResult
from catalog.mcp_client.client import acall_tool as acall_mcp_tool
from catalog.mcp_client.client import call_tool as call_mcp_tool
from catalog.mcp_client.content import wire_result
from catalog.mcp_client.sync import mcp_route
from catalog.models import McpServer
from catalog.policies.bundle import CapabilityBundle
from catalog.search.service import search_catalog
from toolhub.tracing import content_recorded, tracer


@dataclass(frozen=True)
class CallOutcome:
    content: str  # what the model receives as the tool message
    is_error: bool = False
    refused: bool = False
    found: tuple[str, ...] = ()  # tool_search: names to load for the next step
    result: dict[str, Any] | None = None  # an MCP tool's whole result as its server sent it (mcp_content.wire_result)


def refusal_reason(name: str, bundle: CapabilityBundle) -> str | None:
    if bundle.holds(name):
        return None
    if name in bundle.deferred_names:
        return f"{name} is deferred: call {settings.TOOLHUB_SEARCH_TOOL} to load it first."
    denied = {tool.name: tool.reason for tool in bundle.denied}
    if name in denied:
        return f"{name} is not available for this request: {denied[name]}."
    return f"There is no tool named {name}."


def schema_problem(arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    missing = [name for name in schema.get("required", []) if name not in arguments]
    if missing:
        return f"Missing required arguments: {', '.join(missing)}. Ask the user for them; do not invent values."
    # The schema itself was checked when the tool was saved; checking it again on every call costs ~2 ms.
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(arguments))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        return f"Invalid arguments at {where}: {error.message}"
    return None


def run_tool_search(
    arguments: dict[str, Any], bundle: CapabilityBundle, *, emit: Emit, owner_id: int | None = None
) -> CallOutcome:
    """The model's tool_search over what the bundle's decision allows; `owner_id`: whose learned examples may help
    (with TOOLHUB_LEARN_PER_OWNER, as the steward's own ranking for that owner)."""
    query = arguments.get("query", "")
    result = search_catalog(
        query, allowed=bundle.searchable_names(), limit=arguments.get("limit", 5), owner_id=owner_id
    )
    if result.error:
        emit("tool", f"🔎 Tool search failed: {result.error}", tool_name=settings.TOOLHUB_SEARCH_TOOL)
        return CallOutcome(content=json.dumps({"error": result.error}), is_error=True)
    if not result.names:
        emit("tool", f'🔎 No tool matches "{query}"', tool_name=settings.TOOLHUB_SEARCH_TOOL, note=result.note)
    elif result.mode == "bm25":
        emit("tool", f"🔎 Tool search ran keyword-only: {result.note}", tool_name=settings.TOOLHUB_SEARCH_TOOL)
    payload = {"found": result.names, "mode": result.mode}
    if result.note:
        payload["note"] = result.note
    if result.names:
        payload["loaded"] = "These tools are loaded for your next step."
    return CallOutcome(content=json.dumps(payload, ensure_ascii=False), found=tuple(result.names))


def execute(
    call: ToolCall,
    bundle: CapabilityBundle,
    *,
    emit: Emit,
    max_result_tokens: int,
    approved: bool = False,
    owner_id: int | None = None,
    mcp_caller: Callable[[], Caller] | None = None,
) -> CallOutcome:
    """Run one call as an `execute_tool` span (GenAI conventions): the tool, its MCP server, the outcome; its
    arguments and result only with TOOLHUB_TRACE_CONTENT. An MCP tool is called for `mcp_caller()` when given
    (asked only then: a turn's caller costs queries), else for the caller already set (catalog.mcp_client.callers)."""
    with _tool_span(call, lambda: mcp_route(call.name) if bundle.holds(call.name) else None) as outcome_of:
        return outcome_of(_execute(call, bundle, emit=emit, max_result_tokens=max_result_tokens, approved=approved,
                                   owner_id=owner_id, mcp_caller=mcp_caller))  # fmt: skip


async def execute_on_server(
    call: ToolCall, route: tuple[McpServer, str], arguments: dict[str, Any], *, emit: Emit, max_result_tokens: int
) -> CallOutcome:
    """`execute` of a call already decided and checked (agents.mcp_gateway.server.plan_call: policy permits it with
    no approval, `arguments` match the tool's schema), on its MCP server `route` (mcp_route), awaited on the
    caller's event loop: no worker thread, no database. The span and the outcome are `execute`'s."""
    with _tool_span(call, lambda: route) as outcome_of:
        mcp_result = await acall_mcp_tool(route[0], route[1], arguments)
        return outcome_of(mcp_outcome(call.name, mcp_result, emit=emit, max_result_tokens=max_result_tokens))


@contextlib.contextmanager
def _tool_span(
    call: ToolCall, route: Callable[[], tuple[McpServer, str] | None]
) -> Iterator[Callable[[CallOutcome], CallOutcome]]:
    """The call's `execute_tool` span; yields what records the call's outcome on it (and returns the outcome)."""
    with tracer().start_as_current_span(f"execute_tool {call.name}", record_exception=False,
                                        set_status_on_exception=False) as span:  # fmt: skip
        if not span.is_recording():
            yield _unrecorded
            return
        found = route()
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                             "gen_ai.tool.call.id": call.id,
                             "gen_ai.tool.type": "extension" if found else "function"})  # fmt: skip
        if found is not None:
            span.set_attributes({"toolhub.mcp.server": found[0].name, "toolhub.mcp.tool": found[1]})
        if content_recorded():
            span.set_attribute("gen_ai.tool.call.arguments", call.arguments or "{}")
        try:
            yield lambda outcome: _recorded(span, outcome)
        except Exception as exc:
            span.set_attributes({"toolhub.tool.outcome": "error", "error.type": type(exc).__qualname__})
            span.set_status(StatusCode.ERROR, str(exc))
            raise


def _unrecorded(outcome: CallOutcome) -> CallOutcome:
    return outcome


def _recorded(span: Span, outcome: CallOutcome) -> CallOutcome:
    outcome_name = "refused" if outcome.refused else "error" if outcome.is_error else "ok"
    span.set_attribute("toolhub.tool.outcome", outcome_name)
    if outcome.is_error:
        span.set_attribute("error.type", "tool_refused" if outcome.refused else "tool_error")
        span.set_status(StatusCode.ERROR)
    if content_recorded():
        span.set_attribute("gen_ai.tool.call.result", outcome.content)
    return outcome


def _execute(
    call: ToolCall,
    bundle: CapabilityBundle,
    *,
    emit: Emit,
    max_result_tokens: int,
    approved: bool,
    owner_id: int | None,
    mcp_caller: Callable[[], Caller] | None = None,
) -> CallOutcome:
    reason = refusal_reason(call.name, bundle)
    if reason:
        return CallOutcome(content=json.dumps({"error": reason}), is_error=True, refused=True)
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return CallOutcome(content=json.dumps({"error": "Arguments are not valid JSON."}), is_error=True)
    if not isinstance(arguments, dict):
        return CallOutcome(content=json.dumps({"error": "Arguments must be a JSON object."}), is_error=True)
    tool = next(tool for tool in bundle.loaded if tool.name == call.name)
    problem = schema_problem(arguments, tool.definition["function"]["parameters"])
    if problem:
        return CallOutcome(content=json.dumps({"error": problem}), is_error=True)
    if tool.requires_confirmation and not approved:
        message = f"{call.name} requires an operator's approval before it runs; it was not run."
        return CallOutcome(content=json.dumps({"error": message}), is_error=True, refused=True)
    if call.name == settings.TOOLHUB_SEARCH_TOOL:
        return run_tool_search(arguments, bundle, emit=emit, owner_id=owner_id)
    route = mcp_route(call.name)  # an MCP tool runs on its server even where a builtin handler has its name
    if route is None and call.name in BUILTIN_TOOL_NAMES:
        result = run_builtin(call.name, arguments, emit=emit)
        content = {"error": result.content} if result.is_error and isinstance(result.content, str) else result.content
        text, _cut = truncate_result(content, max_result_tokens)
        return CallOutcome(content=text, is_error=result.is_error)
    if route is None:
        message = f"{call.name} runs on an MCP server that this toolhub is not connected to; it was not run."
        return CallOutcome(content=json.dumps({"error": message}), is_error=True)
    server, server_name = route
    with calling_as(mcp_caller()) if mcp_caller is not None else contextlib.nullcontext():
        mcp_result = call_mcp_tool(server, server_name, arguments)
    return mcp_outcome(call.name, mcp_result, emit=emit, max_result_tokens=max_result_tokens)


def mcp_outcome(name: str, mcp_result: McpCallResult, *, emit: Emit, max_result_tokens: int) -> CallOutcome:
    """An MCP tool's answer as the call's outcome: the model's text, cut to the budget, and the whole result."""
    if mcp_result.is_error:  # a crash, timeout or protocol error, or the tool's own refusal: the user sees it too
        emit("tool_error", f"⚠ {name} failed: {mcp_result.content[:300]}", tool_name=name)
    text, _cut = truncate_result(mcp_content(mcp_result), max_result_tokens)
    answered = mcp_result.blocks or mcp_result.structured is not None
    whole = wire_result(mcp_result.blocks, mcp_result.structured, mcp_result.is_error) if answered else None
    return CallOutcome(content=text, is_error=mcp_result.is_error, result=whole)


def mcp_content(result: McpCallResult) -> object:
    """An MCP tool's answer as the model sees it: errors always as {"error": ...}, never wrapped twice."""
    if not result.is_error:
        return result.content
    try:
        parsed = json.loads(result.content)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) and "error" in parsed else {"error": result.content}
