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

TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def validate_tool_name(name: str) -> None:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
        raise ValidationError(
            "A tool name is 1-64 letters, digits, '_' or '-' (got %(name)r).",
            code="invalid_tool_name",
            params={"name": name},
        )


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
