"""Template filters that show policy values to people; display only, never decide anything."""

from django import template

from catalog.models import ToolPolicy

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


@register.filter
def policy_status(value) -> str:
    """A policy status as people read it: its choice's label ("rejected" is shown as "denied")."""
    try:
        return ToolPolicy.Status(value).label
    except ValueError:
        return str(value)


@register.filter
def shown_as(value, field: str) -> str:
    """A snapshot value of `field` as text (`shown`), the status by its label."""
    return policy_status(value) if field == "status" and value is not None else shown(value)
