"""An API client's own tools (OpenAI `tools`, `tool_choice`, `parallel_tool_calls`): checked at request time.

Client tools join the turn's bundle as client-side tools (catalog.policies.bundle.with_client_tools): their schemas
count in the token budget and the console shows them, but toolhub never runs one. When the model calls a
client tool the turn ends with finish_reason "tool_calls"; the client runs it and sends the result back as a
`role: "tool"` message in its next request, which continues the conversation. toolhub's policies do not apply
to client tools, with one rule: a client tool may not take the name of a tool in toolhub's catalog (nor of
the search tool). That is a 400 `tool_name_conflict`, so a call is never ambiguous about who runs it.

Pure checks on plain values (the caller passes the catalog's names); nothing here runs a tool or reads a policy.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from django.core.exceptions import ValidationError

from catalog.models.schemas import validate_input_schema, validate_tool_name

from . import memory

if TYPE_CHECKING:
    from agents.models import Turn

# OpenAI's tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.
ToolChoice = str | dict[str, Any]


class StepOptions(TypedDict, total=False):
    """What a model step passes on of the client's choices (agents.providers.Provider.stream's keywords)."""

    tool_choice: ToolChoice
    parallel_tool_calls: bool


CHOICE_WORDS = ("none", "auto", "required")
EMPTY_PARAMETERS = {"type": "object", "properties": {}}


class ClientToolError(ValueError):
    """Bad client tools or tool messages: the API answers 400 with this message, param and code."""

    def __init__(self, message: str, *, param: str, code: str | None = None):
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


@dataclass(frozen=True)
class ClientTools:
    definitions: tuple[dict[str, Any], ...] = ()  # {"type": "function", "function": {name, description, parameters}}
    tool_choice: ToolChoice | None = None  # None: the client did not say (the model's default, auto)
    parallel_tool_calls: bool | None = None  # None: the client did not say

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(definition["function"]["name"] for definition in self.definitions)

    @property
    def forced_name(self) -> str | None:
        """The function a named tool_choice forces, if any."""
        return self.tool_choice["function"]["name"] if isinstance(self.tool_choice, dict) else None

    def step_options(self, step: int) -> StepOptions:
        """tool_choice and parallel_tool_calls for model step `step` (0 is the request's first step).

        The client's tool_choice applies to the first step only: after it, toolhub's own tool results are in,
        and forcing a call again would loop until the step limit. "none" holds for every step.
        """
        options: StepOptions = {}
        if self.tool_choice is not None and (step == 0 or self.tool_choice == "none"):
            options["tool_choice"] = self.tool_choice
        if self.parallel_tool_calls is not None:
            options["parallel_tool_calls"] = self.parallel_tool_calls
        return options

    @classmethod
    def of_turn(cls, turn: "Turn") -> "ClientTools":
        return cls(tuple(turn.client_tools or ()), turn.tool_choice, turn.parallel_tool_calls)


def _definition(index: int, tool: object) -> dict[str, Any]:
    where = f"tools[{index}]"
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise ClientToolError(f'{where} must be {{"type": "function", "function": {{...}}}}.', param=f"{where}.type")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise ClientToolError(f"{where}.function must be an object.", param=f"{where}.function")
    name = function.get("name")
    try:
        validate_tool_name(name)
    except ValidationError as error:
        raise ClientToolError(f"{where}.function.name: {error.messages[0]}", param=f"{where}.function.name") from None
    description = function.get("description", "")
    if not isinstance(description, str):
        raise ClientToolError(f"{where}.function.description must be a string.", param=f"{where}.function.description")
    parameters = function.get("parameters", EMPTY_PARAMETERS)
    try:
        validate_input_schema(parameters)
    except ValidationError as error:
        raise ClientToolError(
            f"{where}.function.parameters of {name!r} is not a valid JSON schema: {error.messages[0]}",
            param=f"{where}.function.parameters",
            code="invalid_tool_schema",
        ) from None
    definition: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        definition["description"] = description
    if isinstance(function.get("strict"), bool):
        definition["strict"] = function["strict"]
    return {"type": "function", "function": definition}


def _tool_choice(choice: object, names: tuple[str, ...]) -> ToolChoice | None:
    if choice is None or choice in CHOICE_WORDS:
        if choice == "required" and not names:
            raise ClientToolError('tool_choice "required" needs at least one tool in tools.', param="tool_choice")
        return choice
    named = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(named, dict) or not isinstance(named.get("name"), str):
        raise ClientToolError(
            'tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.',
            param="tool_choice",
        )
    if named["name"] not in names:
        raise ClientToolError(
            f"tool_choice names the function {named['name']!r}, which is not among the request's tools"
            + (f" ({', '.join(names)})." if names else " (there are none)."),
            param="tool_choice",
            code="tool_not_found",
        )
    return {"type": "function", "function": {"name": named["name"]}}


def parse_client_tools(
    tools: object, tool_choice: object, parallel_tool_calls: object, *, max_tools: int
) -> ClientTools:
    """The request's client tools, normalised, or ClientToolError naming the first problem."""
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise ClientToolError("tools must be an array of function tools.", param="tools")
    if len(tools) > max_tools:
        raise ClientToolError(
            f"tools has {len(tools)} tools; at most {max_tools} are allowed.", param="tools", code="too_many_tools"
        )
    definitions = tuple(_definition(index, tool) for index, tool in enumerate(tools))
    seen: set[str] = set()
    for index, definition in enumerate(definitions):
        name = definition["function"]["name"]
        if name in seen:
            raise ClientToolError(
                f"tools[{index}]: the function name {name!r} is used twice; tool names must be unique.",
                param=f"tools[{index}].function.name",
                code="duplicate_tool_name",
            )
        seen.add(name)
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise ClientToolError("parallel_tool_calls must be a boolean.", param="parallel_tool_calls")
    names = tuple(definition["function"]["name"] for definition in definitions)
    return ClientTools(definitions, _tool_choice(tool_choice, names), parallel_tool_calls)


def check_name_conflicts(client: ClientTools, toolhub_names: Iterable[str]) -> None:
    """The name clash rule: a client tool named like a toolhub tool is refused (400), never silently shadowed."""
    taken = set(toolhub_names)
    for index, name in enumerate(client.names):
        if name in taken:
            raise ClientToolError(
                f"tools[{index}]: {name!r} is the name of a toolhub tool; give the client tool another name.",
                param=f"tools[{index}].function.name",
                code="tool_name_conflict",
            )


def _check_tool_calls(index: int, calls: object) -> None:
    if not isinstance(calls, list):
        raise ClientToolError(f"messages[{index}].tool_calls must be an array.", param="messages")
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(call.get("id") if isinstance(call, dict) else None, str)
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise ClientToolError(
                f"messages[{index}].tool_calls: each call needs an id, and a function with a name and "
                "arguments (a JSON string).",
                param="messages",
            )


def check_transcript(messages: list[memory.ChatMessage]) -> None:
    """Assistant tool calls are well formed, and each tool message answers an earlier call of its turn, once.

    `messages` are the request's, in the OpenAI shape. System messages are left out of the order check:
    toolhub folds them into its own system prompt wherever they stand.
    """
    for index, message in enumerate(messages):
        if message.get("tool_calls"):
            if message["role"] != memory.ASSISTANT:
                raise ClientToolError(f"messages[{index}]: only assistant messages carry tool_calls.", param="messages")
            _check_tool_calls(index, message["tool_calls"])
        if message["role"] == memory.TOOL and not message.get("tool_call_id"):
            raise ClientToolError(
                f"messages[{index}]: a tool message needs the tool_call_id of the call it answers.", param="messages"
            )
    positions = [index for index, message in enumerate(messages) if message["role"] != memory.SYSTEM]
    try:
        memory.validate_transcript([messages[index] for index in positions])
    except memory.InvalidTranscript as problem:
        text = str(problem)
        # validate_transcript counts without the system messages: name the request's own index.
        if text.startswith("message "):
            number, _, rest = text.removeprefix("message ").partition(":")
            if number.isdigit():
                text = f"messages[{positions[int(number)]}]:{rest}"
        raise ClientToolError(text + ".", param="messages", code="invalid_tool_messages") from None
