"""System checks: fail closed on tools without an approved policy; warn on oversized schemas.

`manage.py check` errors (catalog.E001) when an enabled tool has no policy or
one still in draft: it must be approved (active) or explicitly rejected.
Tools over TOOLHUB_MAX_TOOL_SCHEMA_TOKENS are warnings (catalog.W001). Before
the tables exist (a fresh database) there is nothing to check.
"""

from django.conf import settings
from django.core.checks import Error, Warning, register
from django.db import DatabaseError

from .models import Tool, ToolPolicy


@register()
def tools_have_a_decided_policy(app_configs=None, **kwargs):
    try:
        undecided = list(
            Tool.objects.filter(enabled=True)
            .exclude(policy__status__in=[ToolPolicy.Status.ACTIVE, ToolPolicy.Status.REJECTED])
            .values_list("name", "policy__status")
        )
    except DatabaseError:
        return []
    if not undecided:
        return []
    described = ", ".join(f"{name} ({status or 'no policy'})" for name, status in undecided)
    return [
        Error(
            f"{len(undecided)} enabled tool(s) have no active or rejected policy and are denied: {described}.",
            hint="Approve a policy (status active) or reject the tool on /catalog/ or in the admin.",
            id="catalog.E001",
        )
    ]


@register()
def tool_schemas_fit_the_token_gate(app_configs=None, **kwargs):
    cap = settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS
    try:
        oversized = list(Tool.objects.filter(enabled=True, schema_tokens__gt=cap).values_list("name", "schema_tokens"))
    except DatabaseError:
        return []
    return [
        Warning(
            f"Tool {name} has a {tokens}-token schema, over the {cap}-token cap.",
            hint="Split it into staged tools or trim its schema (TOOLHUB_MAX_TOOL_SCHEMA_TOKENS sets the cap).",
            id="catalog.W001",
        )
        for name, tokens in oversized
    ]
