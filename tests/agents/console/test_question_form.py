"""An operator's answer to an MCP server's question is checked against the server's requestedSchema on the server:
types, required fields, choices, lengths and bounds; what passes is the JSON the server reads."""

import pytest
from django.http import QueryDict

from agents.console.question_form import QuestionForm

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "As on the card", "minLength": 2,
                 "maxLength": 5},
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "subscribe": {"type": "boolean", "default": True},
        "colour": {"type": "string", "enum": ["red", "blue"], "enumNames": ["Red", "Blue"]},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 2},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "age", "colour"],
}  # fmt: skip


def posted(**values) -> QueryDict:
    data = QueryDict(mutable=True)
    for key, value in values.items():
        data.setlist(f"field-{key}", value if isinstance(value, list) else [value])
    return data


def test_a_valid_answer_becomes_json_values_of_the_schemas_types():
    form = QuestionForm(SCHEMA, posted(name="Ann", age="30", ratio="0.5", subscribe="on", colour="blue", size="l",
                                       tags=["a", "c"], email="ann@example.com"))  # fmt: skip
    assert form.is_valid(), form.errors
    assert form.content() == {"name": "Ann", "age": 30, "ratio": 0.5, "subscribe": True, "colour": "blue",
                              "size": "l", "tags": ["a", "c"], "email": "ann@example.com"}  # fmt: skip


def test_optional_fields_left_empty_are_omitted_and_an_unticked_box_is_false():
    form = QuestionForm(SCHEMA, posted(name="Ann", age="30", colour="red", ratio="1"))
    assert form.is_valid(), form.errors
    assert form.content() == {"name": "Ann", "age": 30, "ratio": 1, "subscribe": False, "colour": "red"}


@pytest.mark.parametrize(
    ("values", "field", "error"),
    [
        ({"age": "30", "colour": "red"}, "name", "This field is required."),
        ({"name": "A", "age": "30", "colour": "red"}, "name", "at least 2 characters"),
        ({"name": "Annabel", "age": "30", "colour": "red"}, "name", "at most 5 characters"),
        ({"name": "Ann", "age": "thirty", "colour": "red"}, "age", "Enter a whole number."),
        ({"name": "Ann", "age": "3.5", "colour": "red"}, "age", "Enter a whole number."),
        ({"name": "Ann", "age": "17", "colour": "red"}, "age", "greater than or equal to 18"),
        ({"name": "Ann", "age": "30", "colour": "red", "ratio": "2"}, "ratio", "less than or equal to 1"),
        ({"name": "Ann", "age": "30", "colour": "red", "ratio": "nan"}, "ratio", "Enter a number."),
        ({"name": "Ann", "age": "30", "colour": "green"}, "colour", "Select a valid choice."),
        ({"name": "Ann", "age": "30", "colour": "red", "size": "m"}, "size", "Select a valid choice."),
        ({"name": "Ann", "age": "30", "colour": "red", "tags": ["a", "z"]}, "tags", "Select a valid choice."),
        ({"name": "Ann", "age": "30", "colour": "red", "tags": ["a", "b", "c"]}, "tags", "Choose at most 2."),
        ({"name": "Ann", "age": "30", "colour": "red", "email": "nope"}, "email", "valid email"),
    ],
)
def test_an_answer_that_breaks_the_schema_is_refused_next_to_its_field(values, field, error):
    form = QuestionForm(SCHEMA, posted(**values))
    assert not form.is_valid()
    assert error in " ".join(form.errors[field])
    assert form.first_error().endswith(form.errors[field][0])


def test_labels_and_help_come_from_title_and_description_and_server_text_is_escaped():
    schema = {"type": "object", "properties": {"x": {"type": "string", "title": "<b>Name</b>",
                                                     "description": "<script>alert(1)</script>"}}}  # fmt: skip
    form = QuestionForm(schema, auto_id="q7-%s")
    field = form["x"]
    assert "&lt;b&gt;Name&lt;/b&gt;" in field.label_tag() and "<b>" not in field.label_tag()
    assert field.help_text == "<script>alert(1)</script>"  # rendered with {{ }}: escaped by the template
    assert 'name="field-x"' in str(field) and 'id="q7-field-x"' in str(field) and "required" not in str(field)


def test_required_fields_are_marked_required_in_the_html():
    form = QuestionForm(SCHEMA)
    assert form.fields["name"].required and " required" in str(form["name"])
    assert not form.fields["subscribe"].required  # a box: unticked is an answer (false)
    assert form["subscribe"].initial is True  # the schema's default


def test_a_property_named_like_the_forms_own_inputs_keeps_its_own_value():
    schema = {"type": "object", "properties": {"decision": {"type": "string"}}, "required": ["decision"]}
    form = QuestionForm(schema, QueryDict("decision=answer&field-decision=keep+it"))
    assert form.is_valid() and form.content() == {"decision": "keep it"}
