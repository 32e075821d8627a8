"""Staged rule creation: each workflow step loads a fraction of the giant create_rule schema."""

import pytest

from catalog.models import Tool
from catalog.policies.bundle import build_bundle
from catalog.policies.decision import RoutingDecision, load_catalog
from catalog.policies.staged import narrow_schema, staged_choices

CHOICE = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "formula": {
            "description": "How points are computed.",
            "oneOf": [
                {"type": "object", "properties": {"type": {"const": "fixed"}, "points": {"type": "integer"}}},
                {"type": "object", "properties": {"type": {"const": "multiplier"}, "factor": {"type": "number"}}},
            ],
        },
    },
}


def test_type_first_then_only_the_chosen_variant():
    assert staged_choices(CHOICE) == {"formula": ["fixed", "multiplier"]}
    first = narrow_schema(CHOICE, {})
    assert first["properties"]["formula"]["properties"] == {"type": {"type": "string", "enum": ["fixed", "multiplier"]}}
    chosen = narrow_schema(CHOICE, {"formula": "multiplier"})
    assert chosen["properties"]["formula"]["properties"]["factor"] == {"type": "number"}
    assert "oneOf" not in chosen["properties"]["formula"]
    assert CHOICE["properties"]["formula"]["oneOf"], "the stored schema is never modified"


def test_schema_without_choices_is_returned_as_is():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert narrow_schema(schema, {"formula": "x"}) is schema


@pytest.mark.django_db
def test_each_rule_creation_step_loads_far_fewer_tokens_than_create_rule(demo_catalog):
    catalog = load_catalog()
    giant = Tool.objects.get(name="create_rule").schema_tokens
    steps = [
        ("rule_draft", {}, "create_rule_draft"),
        ("rule_formula", {}, "set_rule_formula"),
        ("rule_formula", {"formula": "tiered_spend"}, "set_rule_formula"),
        ("rule_criteria", {}, "set_rule_criteria"),
        ("rule_submit", {}, "submit_rule"),
    ]
    for phase, choices, tool in steps:
        decision = RoutingDecision("create", frozenset({"loyalty", "campaigns"}), 1.0, phase)
        bundle = build_bundle(decision, catalog, choices=choices)
        assert tool in bundle.loaded_names
        assert "create_rule" not in bundle.loaded_names
        step_tokens = next(t.schema_tokens for t in bundle.loaded if t.name == tool)
        assert step_tokens * 3 < giant, (tool, step_tokens, giant)
    formula = next(t for t in bundle.loaded if t.name == "submit_rule")
    assert formula.requires_confirmation
