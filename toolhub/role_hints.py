"""Template tag (a builtin of every template): why an action is not offered, in the role it needs.

`{% needs_role "catalog.add_mcpserver" "Adding an MCP server" %}` -> "Adding an MCP server needs the admin
role." Pages that hide an action for lack of a permission show this in its place; they never decide here.
"""

from django import template

from toolhub.roles import role_needed

register = template.Library()


@register.simple_tag
def needs_role(permission: str, action: str) -> str:
    return f"{action} needs the {role_needed(permission)} role."
