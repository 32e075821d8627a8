"""Staged schemas: a workflow tool with a type-discriminated `oneOf` shows one variant at a time.

A property whose `oneOf` variants each fix `type` with `const` is a choice.
Until the workflow has chosen (state `choices`, e.g. {"formula": "multiplier"}),
the model sees only the type to choose; after that, only the chosen variant.
So a step never carries the schemas of the seven formula types it is not using.
Pure functions over JSON Schema; never touches the stored tool.
"""

import copy
from typing import Any


def _variants(prop: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    options = prop.get("oneOf")
    if not isinstance(options, list) or not options:
        return None
    variants = {}
    for option in options:
        const = option.get("properties", {}).get("type", {}).get("const") if isinstance(option, dict) else None
        if not isinstance(const, str):
            return None
        variants[const] = option
    return variants


def staged_choices(schema: dict[str, Any]) -> dict[str, list[str]]:
    """The choice properties of a schema and their type names."""
    return {
        name: list(variants)
        for name, prop in schema.get("properties", {}).items()
        if isinstance(prop, dict) and (variants := _variants(prop))
    }


def narrow_schema(schema: dict[str, Any], choices: dict[str, str]) -> dict[str, Any]:
    """The schema as the model should see it at this step of the workflow."""
    narrowed = None
    for name, prop in schema.get("properties", {}).items():
        variants = _variants(prop) if isinstance(prop, dict) else None
        if not variants:
            continue
        narrowed = narrowed or copy.deepcopy(schema)
        chosen = choices.get(name)
        if chosen in variants:
            replacement = copy.deepcopy(variants[chosen])
            replacement["description"] = f"{prop.get('description', '')} Type {chosen} was chosen.".strip()
        else:
            replacement = {
                "type": "object",
                "description": f"{prop.get('description', '')} Choose the type first; its fields come next.".strip(),
                "properties": {"type": {"type": "string", "enum": list(variants)}},
                "required": ["type"],
                "additionalProperties": False,
            }
        narrowed["properties"][name] = replacement
    return narrowed if narrowed is not None else schema
