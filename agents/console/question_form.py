"""The form an operator answers an MCP server's question with, built from the server's requestedSchema.

One Django field per property, as MCP restricts a form (catalog.mcp_client.callers.elicitation_problem): a string
(with its minLength, maxLength and format email, uri, date or date-time), a number or integer (minimum, maximum), a
boolean, a single choice (enum with enumNames, or oneOf of const/title) or several (an array whose items are an enum
or anyOf; minItems, maxItems). Labels are the property's title (else its name), help texts its description; Django
escapes both. The schema's `required` fields are required (a boolean is a box: unticked is false). `content()` is
the answer as the server reads it: JSON values of the schema's types, the optional fields left empty omitted. Never
writes.
"""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError


def _choices(field: dict) -> list[tuple[str, str]]:
    """(value, label) of a single or multiple choice's options."""
    options = field.get("oneOf") or field.get("anyOf")
    if isinstance(options, list):
        return [(str(option.get("const")), str(option.get("title") or option.get("const")))
                for option in options if isinstance(option, dict) and "const" in option]  # fmt: skip
    values = [str(value) for value in field.get("enum") or []]
    names = field.get("enumNames")
    if isinstance(names, list) and len(names) == len(values):
        return list(zip(values, (str(name) for name in names), strict=True))
    return [(value, value) for value in values]


def _bound(field: dict, key: str) -> int | float | None:
    value = field.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _length(field: dict, key: str) -> int | None:
    value = field.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class _Items(forms.MultipleChoiceField):
    """Several choices, with the array's minItems and maxItems."""

    def __init__(self, *, min_items: int | None, max_items: int | None, **kwargs: Any):
        super().__init__(**kwargs)
        self.min_items, self.max_items = min_items, max_items

    def validate(self, value: list) -> None:
        super().validate(value)
        if self.min_items is not None and value and len(value) < self.min_items:
            raise ValidationError(f"Choose at least {self.min_items}.")
        if self.max_items is not None and len(value) > self.max_items:
            raise ValidationError(f"Choose at most {self.max_items}.")


def form_field(field: dict, *, required: bool) -> forms.Field:
    """The Django field of one property of the schema."""
    common: dict[str, Any] = {"required": required, "help_text": str(field.get("description") or "")}
    if field.get("title"):
        common["label"] = str(field["title"])
    default = field.get("default")
    kind = field.get("type")
    if kind == "array":
        items = field["items"] if isinstance(field.get("items"), dict) else {}
        return _Items(choices=_choices(items), widget=forms.CheckboxSelectMultiple,
                      min_items=_length(field, "minItems"), max_items=_length(field, "maxItems"),
                      initial=default if isinstance(default, list) else None, **common)  # fmt: skip
    if kind == "boolean":
        return forms.BooleanField(**common | {"required": False}, initial=default is True)
    if kind in ("number", "integer"):
        bounds: dict[str, Any] = {"min_value": _bound(field, "minimum"), "max_value": _bound(field, "maximum")}
        if kind == "integer":
            return forms.IntegerField(initial=default, **bounds, **common)
        return forms.FloatField(initial=default, **bounds, **common)
    if "enum" in field or "oneOf" in field:
        choices = _choices(field)
        if not required:
            choices = [("", "—"), *choices]
        return forms.ChoiceField(choices=choices, initial=default, **common)
    lengths: dict[str, Any] = {"min_length": _length(field, "minLength"), "max_length": _length(field, "maxLength")}
    string_format = field.get("format")
    if string_format == "email":
        return forms.EmailField(initial=default, **lengths, **common)
    if string_format == "uri":
        return forms.URLField(initial=default, assume_scheme="https", **lengths, **common)
    if string_format == "date":
        return forms.DateField(initial=default, widget=forms.DateInput(attrs={"type": "date"}), **common)
    if string_format == "date-time":
        return forms.DateTimeField(initial=default, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
                                   **common)  # fmt: skip
    return forms.CharField(initial=default, strip=False, **lengths, **common)


# The fields' names are the schema's behind this prefix ("field-colour"): a property may be called "decision" or
# "next", as the form's own buttons and inputs are.
FIELD_PREFIX = "field"


class QuestionForm(forms.Form):
    """The answer to one question; `schema` is its stored requestedSchema (validated when asked)."""

    def __init__(self, schema: dict, *args: Any, **kwargs: Any):
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("prefix", FIELD_PREFIX)
        super().__init__(*args, **kwargs)
        self.kinds: dict[str, str] = {}
        required = set(schema.get("required") or [])
        for name, field in (schema.get("properties") or {}).items():
            self.fields[name] = form_field(field, required=name in required)
            self.kinds[name] = str(field.get("type"))

    def content(self) -> dict[str, Any]:
        """The valid answer as JSON values for the server; optional fields left empty are omitted."""
        content: dict[str, Any] = {}
        for name, value in self.cleaned_data.items():
            if value is None or value == "" or (value == [] and not self.fields[name].required):
                continue
            if hasattr(value, "isoformat"):
                value = value.isoformat()
            elif self.kinds[name] == "number" and isinstance(value, float) and value.is_integer():
                value = int(value)  # 3, not 3.0: a JSON number either way, the one the operator typed
            content[name] = value
        return content

    def first_error(self) -> str:
        for name, errors in self.errors.items():
            label = self.fields[name].label or name if name in self.fields else ""
            return f"{label}: {errors[0]}" if label else str(errors[0])
        return ""
