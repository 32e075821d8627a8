"""A stdio MCP server for tests that keeps state per process and asks its client during calls.

remember(value) / recall(): a list kept in the process (one per connection: per-user connections keep one each);
where(): its working directory; ask(message): an elicitation/create with one string field, answered as
"action=<action> content=<json>"; ask_malformed(): an elicitation whose form nests an object (not allowed);
sample(prompt): a sampling/createMessage, answered as "sampled: <text>"; sample_forever(): samples until its
client stops it. A request that fails is answered as "error: <message>".
"""

import json
import os

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

ONE_STRING = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
NESTED = {"type": "object", "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}}
TOOLS = ["remember", "recall", "where", "ask", "ask_malformed", "sample", "sample_forever"]


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


def build_server() -> Server:
    remembered: list[str] = []

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"value": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name=name, input_schema=schema) for name in TOOLS])

    async def sample_once(ctx, prompt: str) -> str:
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
        result = await ctx.session.create_message([message], max_tokens=100_000, related_request_id=ctx.request_id)
        return result.content.text

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        value = (params.arguments or {}).get("value", "")
        try:
            if params.name == "remember":
                remembered.append(value)
                return text(json.dumps(remembered))
            if params.name == "recall":
                return text(json.dumps(remembered))
            if params.name == "where":
                return text(os.getcwd())
            if params.name in ("ask", "ask_malformed"):
                schema = ONE_STRING if params.name == "ask" else NESTED
                answer = await ctx.session.elicit_form(value, schema, related_request_id=ctx.request_id)
                return text(f"action={answer.action} content={json.dumps(answer.content)}")
            if params.name == "sample":
                return text(f"sampled: {await sample_once(ctx, value)}")
            if params.name == "sample_forever":
                while True:
                    try:
                        await sample_once(ctx, "again")
                    except MCPError:
                        await anyio.sleep(0.01)  # a server that ignores refusals and asks again
        except MCPError as exc:
            return text(f"error: {exc.error.message}")
        return text("unknown tool")

    return Server("toolhub-asking", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main() -> None:
    server = build_server()

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
