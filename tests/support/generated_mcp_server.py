"""A generated MCP server for tests and benchmarks: N similar tools over stdio; never imports Django.

    python -m tests.support.generated_mcp_server --tools 1000
    python -m tests.support.generated_mcp_server --tools 3 --malformed gen_tool_0002
    python -m tests.support.generated_mcp_server --tools 1 --extra "has space" --extra a.dotted.name \
        --duplicate gen_tool_0001
    python -m tests.support.generated_mcp_server --tools 1 --content --chatty
    python -m tests.support.generated_mcp_server --tools 0 --library notes   # resources, prompts, progress
    python -m tests.support.generated_mcp_server --tools 1000 --http 127.0.0.1:8766   # streamable HTTP at /mcp
    python -m tests.support.generated_mcp_server --tools 0 --introspect   # says how its process was started

Every gen_tool_NNNN echoes its arguments back as JSON text. --malformed lists
that tool with an input schema that is not valid JSON Schema (a property of
type "nonsense"); --bad-output-schema lists it with an invalid outputSchema;
--extra adds an echo tool of exactly that name, valid or not; --duplicate lists
a tool twice. --content adds one tool per kind of content (CONTENT_TOOLS:
image, audio, resource link, embedded text and blob resources, structured
content with an outputSchema, title and annotations, and `gen_big`, which
answers `bytes` characters of text). --chatty sends notifications nobody
asked for (log messages, progress for an unknown token, a resource update, a
tool list change, a method no spec defines) before it answers each call.
--library NAME serves resources (gen://NAME/readme, gen://NAME/pixel), a
resource template (gen://NAME/notes/{id}), prompts (summarize with a topic
argument, greet), completions of both, and two tools: gen_slow (`steps` steps,
a progress notice and a log message at each when asked) and gen_add_note (adds
resource gen://NAME/added/{id} and says its resource list changed). --introspect
adds `gen_process`, which answers its process's environment, working directory
and resource limits (PROCESS_LIMITS: [soft, hard], -1 for none) as JSON, and
writes the same to process.json in its working directory when it starts.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

MALFORMED_SCHEMA = {"type": "object", "properties": {"q": {"type": "nonsense"}}}
BAD_OUTPUT_SCHEMA = {"type": "object", "properties": {"n": {"type": 42}}}
# The smallest valid PNG (1x1, transparent) and a tiny WAV header with 8 silent samples.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d"
        "0000000049454e44ae426082"
    )
).decode()
_FORMAT = (16).to_bytes(4, "little") + bytes.fromhex("01000100401f0000401f000001000800")  # PCM, mono, 8 kHz, 8 bit
WAV = base64.b64encode(
    b"RIFF" + (44).to_bytes(4, "little") + b"WAVEfmt " + _FORMAT + b"data" + (8).to_bytes(4, "little") + b"\x80" * 8
).decode()
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}},
    "required": ["temperature", "conditions"],
}
EMPTY = {"type": "object", "properties": {}}
PROCESS_LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_CORE")
CONTENT_TOOLS = {
    "gen_image": [
        types.TextContent(type="text", text="A pixel:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
    ],
    "gen_audio": [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")],
    "gen_resource_link": [
        types.ResourceLink(
            type="resource_link", uri="gen://docs/readme", name="readme", mime_type="text/markdown",
            description="The generated readme",
        )
    ],
    "gen_embedded_text": [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="gen://notes/1", mime_type="text/plain", text="Note one."),
        )
    ],
    "gen_embedded_blob": [
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri="gen://files/pixel.png", mime_type="image/png", blob=PNG),
        )
    ],
}  # fmt: skip


def tool_name(index: int) -> str:
    return f"gen_tool_{index:04d}"


def echo_schema(index: int) -> dict:
    return {
        "type": "object",
        "properties": {
            "q": {"type": "string", "description": f"What to look up in area {index}."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["q"],
    }


def generated_tools(count: int, malformed: set[str], bad_output: set[str] = frozenset()) -> list[types.Tool]:
    tools = []
    for index in range(1, count + 1):
        name = tool_name(index)
        tools.append(
            types.Tool(
                name=name,
                description=f"Look up records of generated area {index} by a query (benchmark tool).",
                input_schema=MALFORMED_SCHEMA if name in malformed else echo_schema(index),
                output_schema=BAD_OUTPUT_SCHEMA if name in bad_output else None,
            )
        )
    return tools


def content_tools() -> list[types.Tool]:
    tools = [types.Tool(name=name, description=f"Answers {name[4:].replace('_', ' ')} content.", input_schema=EMPTY)
             for name in CONTENT_TOOLS]  # fmt: skip
    tools.append(
        types.Tool(
            name="gen_weather",
            title="Generated weather",
            description="The weather as structured content.",
            input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            output_schema=WEATHER_SCHEMA,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
    )
    tools.append(
        types.Tool(
            name="gen_big",
            description="Answers `bytes` characters of text.",
            input_schema={"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]},
        )
    )
    return tools


def content_result(name: str, arguments: dict) -> types.CallToolResult:
    if name == "gen_weather":
        weather = {"temperature": 31.5, "conditions": f"Sunny in {arguments.get('city', '?')}"}
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(weather))],
                                    structured_content=weather)  # fmt: skip
    if name == "gen_big":
        line = "record 0123456789 value abcdefghij\n"
        size = int(arguments["bytes"])
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=(line * (size // len(line) + 1))[:size])]
        )
    return types.CallToolResult(content=CONTENT_TOOLS[name])


async def chatter(ctx) -> None:
    """Notifications that answer nothing the client asked."""
    session = ctx.session
    await session.send_notification(
        types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level="error", data="unasked log")
        )
    )
    await session.send_progress_notification("nobody-asked", 0.5, 1.0)
    await session.send_resource_updated("gen://never/subscribed")
    await session.send_tool_list_changed()
    await session._connection.outbound.notify("notifications/made_up", {"noise": True})


LIBRARY_TOPICS = ("apples", "apricots", "bananas")


class Library:
    """What --library NAME serves beside tools."""

    def __init__(self, name: str):
        self.name = name
        self.added: dict[str, str] = {}  # uri -> text, resources gen_add_note made
        self.tools = [
            types.Tool(name="gen_slow", description="Works in steps, telling its progress.",
                       input_schema={"type": "object", "properties": {"steps": {"type": "integer"}}}),
            types.Tool(name="gen_add_note", description="Adds a note resource.",
                       input_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        ]  # fmt: skip

    def uri(self, path: str) -> str:
        return f"gen://{self.name}/{path}"

    def resources(self) -> list[types.Resource]:
        listed = [
            types.Resource(uri=self.uri("readme"), name="readme", title=f"{self.name} readme",
                           mime_type="text/markdown"),
            types.Resource(uri=self.uri("pixel"), name="pixel", mime_type="image/png"),
        ]  # fmt: skip
        return listed + [types.Resource(uri=uri, name=uri.rsplit("/", 1)[1], mime_type="text/plain")
                         for uri in self.added]  # fmt: skip

    def read(self, uri: str) -> types.ReadResourceResult:
        if uri == self.uri("readme"):
            text = f"# The {self.name} readme"
            contents = [types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        elif uri == self.uri("pixel"):
            contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)]
        elif uri in self.added:
            contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text=self.added[uri])]
        elif uri.startswith(self.uri("notes/")):
            note = uri.removeprefix(self.uri("notes/"))
            contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text=f"Note {note}.")]
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}")
        return types.ReadResourceResult(contents=contents)

    def prompts(self) -> list[types.Prompt]:
        topic = types.PromptArgument(name="topic", description="What to summarize", required=True)
        return [
            types.Prompt(name="summarize", title="Summarize", description="Summarize a topic", arguments=[topic]),
            types.Prompt(name="greet", description="A greeting"),
        ]

    def prompt(self, name: str, arguments: dict | None) -> types.GetPromptResult:
        if name == "greet":
            text = f"Hello from {self.name}."
        elif name == "summarize" and (arguments or {}).get("topic"):
            text = f"Summarize {arguments['topic']} in the words of {self.name}."
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Prompt {name} needs a topic" if name == "summarize"
                           else f"Unknown prompt: {name}")  # fmt: skip
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        return types.GetPromptResult(description=f"{name} of {self.name}", messages=[message])

    def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        value = params.argument.value
        choices = LIBRARY_TOPICS if params.argument.name == "topic" else ("1", "2", "3")
        return types.CompleteResult(completion=types.Completion(values=[c for c in choices if c.startswith(value)]))

    async def call(self, ctx, name: str, arguments: dict) -> types.CallToolResult:
        if name == "gen_slow":
            steps = int(arguments.get("steps", 3))
            for step in range(1, steps + 1):
                await ctx.session.report_progress(step, steps, f"step {step} of {steps}")
                params = types.LoggingMessageNotificationParams(level="info", data=f"step {step}", logger=self.name)
                await ctx.session.send_notification(types.LoggingMessageNotification(params=params),
                                                    related_request_id=ctx.request_id)  # fmt: skip
                await anyio.sleep(0.05)
            text = f"done in {steps} steps"
        else:
            uri = self.uri(f"added/{arguments['id']}")
            self.added[uri] = f"Added note {arguments['id']}."
            await ctx.session.send_resource_list_changed()
            text = uri
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def process_report() -> dict:
    """How this process was started: what gen_process answers."""
    return {
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "limits": {name: list(resource.getrlimit(getattr(resource, name))) for name in PROCESS_LIMITS},
    }


def build_server(count: int, malformed: set[str], *, extra=(), duplicate=(), bad_output=frozenset(), content=False,
                 chatty=False, library: str | None = None, introspect=False) -> Server:  # fmt: skip
    listing = generated_tools(count, malformed, bad_output)
    if introspect:
        listing.append(types.Tool(name="gen_process", description="Says how its process started.", input_schema=EMPTY))
    listing += [types.Tool(name=name, description="An extra echo tool.", input_schema=echo_schema(0)) for name in extra]
    listing += [tool for tool in listing if tool.name in set(duplicate)]
    if content:
        listing += content_tools()
    content_names = {tool.name for tool in content_tools()}
    shelf = Library(library) if library else None
    if shelf:
        listing += shelf.tools

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if chatty:
            await chatter(ctx)
        if content and params.name in content_names:
            return content_result(params.name, params.arguments or {})
        if shelf and params.name in {"gen_slow", "gen_add_note"}:
            return await shelf.call(ctx, params.name, params.arguments or {})
        if introspect and params.name == "gen_process":
            return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(process_report()))])
        text = json.dumps({"tool": params.name, "arguments": params.arguments or {}})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    if shelf is None:
        return Server("toolhub-generated", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)

    async def on_list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=shelf.resources())

    async def on_list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(uri_template=shelf.uri("notes/{id}"), name="note", mime_type="text/plain")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def on_read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return shelf.read(str(params.uri))

    async def on_list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=shelf.prompts())

    async def on_get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return shelf.prompt(params.name, params.arguments)

    async def on_completion(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        return shelf.complete(params)

    return Server("toolhub-generated", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                  on_list_resources=on_list_resources, on_list_resource_templates=on_list_resource_templates,
                  on_read_resource=on_read_resource, on_list_prompts=on_list_prompts, on_get_prompt=on_get_prompt,
                  on_completion=on_completion)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.generated_mcp_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--malformed", action="append", default=[], metavar="NAME")
    parser.add_argument("--bad-output-schema", action="append", default=[], metavar="NAME")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME")
    parser.add_argument("--duplicate", action="append", default=[], metavar="NAME")
    parser.add_argument("--content", action="store_true")
    parser.add_argument("--chatty", action="store_true")
    parser.add_argument("--library", metavar="NAME", help="Serve resources and prompts under gen://NAME/.")
    parser.add_argument("--http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp, not stdio.")
    parser.add_argument("--introspect", action="store_true", help="Add gen_process: environment, cwd and limits.")
    options = parser.parse_args(argv)
    if options.introspect:
        with open("process.json", "w") as report:
            json.dump(process_report(), report)
    server = build_server(options.tools, set(options.malformed), extra=options.extra, duplicate=options.duplicate,
                          bad_output=set(options.bad_output_schema), content=options.content,
                          chatty=options.chatty, library=options.library, introspect=options.introspect)  # fmt: skip
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
