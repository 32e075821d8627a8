"""A generated MCP server for tests and benchmarks: N similar tools over stdio; never imports Django.

    python -m tests.generated_mcp_server --tools 1000
    python -m tests.generated_mcp_server --tools 3 --malformed gen_tool_0002
    python -m tests.generated_mcp_server --tools 1000 --http 127.0.0.1:8766   # streamable HTTP at /mcp

Every tool echoes its arguments back as JSON text. --malformed lists that tool
with an input schema that is not valid JSON Schema (a property of type
"nonsense"), so a sync must reject it and import the others.
"""

from __future__ import annotations

import argparse
import json

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MALFORMED_SCHEMA = {"type": "object", "properties": {"q": {"type": "nonsense"}}}


def tool_name(index: int) -> str:
    return f"gen_tool_{index:04d}"


def generated_tools(count: int, malformed: set[str]) -> list[types.Tool]:
    tools = []
    for index in range(1, count + 1):
        name = tool_name(index)
        schema = {
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": f"What to look up in area {index}."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "required": ["q"],
        }
        tools.append(
            types.Tool(
                name=name,
                description=f"Look up records of generated area {index} by a query (benchmark tool).",
                input_schema=MALFORMED_SCHEMA if name in malformed else schema,
            )
        )
    return tools


def build_server(count: int, malformed: set[str]) -> Server:
    listing = generated_tools(count, malformed)

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = json.dumps({"tool": params.name, "arguments": params.arguments or {}})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("toolhub-generated", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.generated_mcp_server", description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--malformed", action="append", default=[], metavar="NAME")
    parser.add_argument("--http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp, not stdio.")
    options = parser.parse_args(argv)
    server = build_server(options.tools, set(options.malformed))
    if options.http:
        import uvicorn

        host, _, port = options.http.rpartition(":")
        uvicorn.run(server.streamable_http_app(host=host), host=host, port=int(port), log_level="warning")
        return

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
