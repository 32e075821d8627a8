"""Template filters that show policy values to people; display only, never decide anything."""

from django import template

register = template.Library()


@register.filter
def shown(value) -> str:
    """A snapshot value as text: lists joined, booleans as yes/no, missing as a dash."""
    if value is None or value == []:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return str(value)


@register.filter
def signed(value: int) -> str:
    """+12 / −3 / 0, for token changes."""
    return f"+{value}" if value > 0 else (f"−{-value}" if value < 0 else "0")


@register.filter
def negated(value: int) -> int:
    return -value
