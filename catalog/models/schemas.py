"""Validation of tool input schemas: a tool's parameters must be a JSON object schema.

Used by the model field, so the admin, forms, the importer and plain saves
all reject the same bad input with the same message.
"""

import json
import re
from functools import lru_cache

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

# What both MCP clients (SEP-986: A-Z a-z 0-9 _ - ., at most 128) and OpenAI-compatible models (no dot, at most
# 64) accept: every name toolhub shows is within this.
MAX_TOOL_NAME_LENGTH = 64
TOOL_NAME_PATTERN = re.compile(rf"^[A-Za-z0-9_-]{{1,{MAX_TOOL_NAME_LENGTH}}}$")


def validate_tool_name(name: object) -> None:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
        raise ValidationError(
            "A tool name is 1-64 letters, digits, '_' or '-' (got %(name)r).",
            code="invalid_tool_name",
            params={"name": name},
        )


MCP_PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)*$")  # no "__": that is the separator
MAX_MCP_PREFIX_LENGTH = 32


def validate_mcp_prefix(prefix: str) -> None:
    """An MCP server's prefix (catalog.mcp_client.names): words of letters and digits joined by single '_' or '-'."""
    if not isinstance(prefix, str) or len(prefix) > MAX_MCP_PREFIX_LENGTH or not MCP_PREFIX_PATTERN.match(prefix):
        raise ValidationError(
            "A prefix is 1-%(max)d letters or digits, in words joined by single '_' or '-' (got %(prefix)r).",
            code="invalid_prefix",
            params={"max": MAX_MCP_PREFIX_LENGTH, "prefix": prefix},
        )


def default_mcp_prefix(server_name: str) -> str:
    """The prefix a server gets from its name: `mcp-server-time` -> `mcp_server_time` (whole words that fit)."""
    words = [word for word in re.split(r"[^A-Za-z0-9]+", server_name.lower()) if word] or ["mcp"]
    prefix = words[0][:MAX_MCP_PREFIX_LENGTH]
    for word in words[1:]:
        if len(prefix) + 1 + len(word) > MAX_MCP_PREFIX_LENGTH:
            break
        prefix = f"{prefix}_{word}"
    return prefix


def validate_input_schema(schema) -> None:
    """Raise ValidationError unless `schema` is a valid JSON Schema of type object."""
    if not isinstance(schema, dict):
        raise ValidationError(
            "The input schema must be a JSON object schema (a mapping), got %(kind)s.",
            code="schema_not_object",
            params={"kind": type(schema).__name__},
        )
    if schema.get("type") != "object":
        raise ValidationError(
            'The input schema must have "type": "object" at the top level (got %(type)r).',
            code="schema_not_object",
            params={"type": schema.get("type")},
        )
    problem = _metaschema_problem(json.dumps(schema, sort_keys=True))
    if problem:
        where, message = problem
        raise ValidationError(
            "The input schema is not valid JSON Schema at %(where)s: %(message)s",
            code="schema_invalid",
            params={"where": where, "message": message},
        )
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    missing = [name for name in required if name not in properties]
    if missing:
        raise ValidationError(
            "Required parameters are not defined in properties: %(missing)s.",
            code="schema_required_undefined",
            params={"missing": ", ".join(missing)},
        )


def validate_output_schema(schema) -> None:
    """An MCP tool's outputSchema: a valid JSON Schema object (what structuredContent is checked against)."""
    if not isinstance(schema, dict):
        raise ValidationError(
            "The output schema must be a JSON Schema object (a mapping), got %(kind)s.",
            code="output_schema_not_object",
            params={"kind": type(schema).__name__},
        )
    problem = _metaschema_problem(json.dumps(schema, sort_keys=True))
    if problem:
        where, message = problem
        raise ValidationError(
            "The output schema is not valid JSON Schema at %(where)s: %(message)s",
            code="output_schema_invalid",
            params={"where": where, "message": message},
        )


@lru_cache(maxsize=4096)
def _metaschema_problem(serialized: str) -> tuple[str, str] | None:
    """Check against the metaschema once per distinct schema (it is the slow part of a save)."""
    try:
        Draft202012Validator.check_schema(json.loads(serialized))
    except SchemaError as exc:
        return "/".join(str(part) for part in exc.path) or "(top level)", exc.message
    return None


def validate_string_list(value) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ValidationError("Expected a list of non-empty strings.", code="not_string_list")
