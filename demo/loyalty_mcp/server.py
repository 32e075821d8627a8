"""The demo Loyalty MCP server: every tool of demo.data.loyalty over stdio (or streamable HTTP), backed by SQLite.

    python -m demo.loyalty_mcp.server --db var/loyalty-mcp.sqlite3
    python -m demo.loyalty_mcp.server --db /tmp/l.sqlite3 --http 127.0.0.1:8765   # streamable HTTP at /mcp

Tools keep their exact name, description and input schema. Each call is
validated against its schema, runs in one SQLite transaction and answers
JSON text; a refused or failed call is an error result, never a crash. The
--test-* options exist for toolhub's tests (a changed, missing, slow or
crashing tool). Never imports Django and never writes to stdout: stdout is
the protocol channel.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from demo.data.loyalty import loyalty_tools

from . import campaigns, members, rewards
from .crud import crud_handler
from .seed import seed
from .store import Store, ToolError

logger = logging.getLogger("demo.loyalty_mcp.loyalty")

SERVER_NAME = "toolhub-demo-loyalty"
HANDLERS = {**campaigns.HANDLERS, **members.HANDLERS, **rewards.HANDLERS}
CRASH_EXIT_CODE = 70


@dataclass
class FaultHooks:
    """Ways tests make the server misbehave on purpose; all empty in normal use."""

    alter: set[str] = field(default_factory=set)  # tools listed with a changed description and schema
    drop: set[str] = field(default_factory=set)  # tools left out of the listing
    delay: dict[str, float] = field(default_factory=dict)  # seconds a tool call sleeps before answering
    crash: set[str] = field(default_factory=set)  # tools whose call kills the server process


def served_tools(hooks: FaultHooks) -> list[dict[str, Any]]:
    tools = []
    for tool in loyalty_tools():
        if tool["name"] in hooks.drop:
            continue
        if tool["name"] in hooks.alter:
            tool["description"] += " (changed on the server)"
            tool["input_schema"]["properties"]["changed_on_server"] = {"type": "boolean", "description": "Test hook."}
        tools.append(tool)
    return tools


def _schema_problem(arguments: dict, schema: dict) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "arguments"
    return f"Invalid arguments at {where}: {error.message}"


def run_tool(store: Store, tool: dict, arguments: Any) -> tuple[Any, bool]:
    """(JSON-able result, is_error) of one call; every failure becomes an error result."""
    name = tool["name"]
    if not isinstance(arguments, dict):
        return {"error": f"{name} needs its arguments as a JSON object."}, True
    problem = _schema_problem(arguments, tool["input_schema"])
    if problem:
        return {"error": problem}, True
    handler = HANDLERS.get(name) or crud_handler(name)
    if handler is None:
        return {"error": f"{name} is not supported by the demo server."}, True
    arguments = {k: v for k, v in arguments.items() if k != "changed_on_server"}
    try:
        with store.transaction():
            return handler(store, arguments), False
    except ToolError as exc:
        return {"error": str(exc)}, True
    except Exception as exc:  # a bug or a bad row must not take the server down
        logger.exception("tool %s failed", name)
        return {"error": f"{name} failed inside the demo server ({type(exc).__name__}: {exc})."}, True


def build_server(store: Store, hooks: FaultHooks | None = None) -> Server:
    hooks = hooks or FaultHooks()
    tools = {tool["name"]: tool for tool in served_tools(hooks)}
    listing = [
        types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"]) for t in tools.values()
    ]

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name in hooks.crash:
            logger.error("test hook: crashing on %s", params.name)
            os._exit(CRASH_EXIT_CODE)
        if params.name in hooks.delay:
            await anyio.sleep(hooks.delay[params.name])
        tool = tools.get(params.name)
        if tool is None:
            payload, is_error = {"error": f"There is no tool named {params.name} on this server."}, True
        else:
            payload, is_error = run_tool(store, tool, params.arguments or {})
        text = json.dumps(payload, ensure_ascii=False, default=str)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    return Server(
        SERVER_NAME,
        version="1.0",
        instructions="Demo Loyalty program: campaigns, rules, members, tiers, points, vouchers, rewards, segments.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def _delay(text: str) -> tuple[str, float]:
    name, _, seconds = text.partition("=")
    return name, float(seconds or 60)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo.loyalty_mcp.server", description=__doc__.split("\n")[0])
    parser.add_argument("--db", required=True, help="SQLite file of the demo data (created and seeded if new).")
    parser.add_argument("--http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp, not stdio.")
    parser.add_argument("--test-alter-tool", action="append", default=[], metavar="NAME")
    parser.add_argument("--test-drop-tool", action="append", default=[], metavar="NAME")
    parser.add_argument("--test-delay-tool", action="append", default=[], metavar="NAME=SECONDS", type=_delay)
    parser.add_argument("--test-crash-on", action="append", default=[], metavar="NAME")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    logger.setLevel(logging.INFO)
    options = parse_args(argv)
    hooks = FaultHooks(
        alter=set(options.test_alter_tool),
        drop=set(options.test_drop_tool),
        delay=dict(options.test_delay_tool),
        crash=set(options.test_crash_on),
    )
    store = Store(options.db)
    with store.transaction():
        if seed(store):
            logger.info("seeded the demo data into %s", options.db)
    server = build_server(store, hooks)
    if options.http:
        import uvicorn

        host, _, port = options.http.rpartition(":")
        uvicorn.run(server.streamable_http_app(host=host), host=host, port=int(port), log_level="warning")
        return

    async def serve_stdio() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve_stdio)


if __name__ == "__main__":
    main()
