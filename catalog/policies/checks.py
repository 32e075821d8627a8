"""System checks: fail closed on tools without an approved policy; warn on oversized schemas.

Both read the database, so both are tagged `database`: Django runs them only
when a command names its databases. `manage.py check --deploy` errors
(catalog.E001) when an enabled tool has no policy or one still in draft: it
must be approved (active) or explicitly rejected. `check --database default`
and `migrate` (Django checks the database it migrates) only warn
(catalog.W002): a tool awaiting a policy is the normal state after an MCP sync
and is denied meanwhile, so it must never stop migrate, makemigrations or
createsuperuser. Tools over TOOLHUB_MAX_TOOL_SCHEMA_TOKENS are warnings
(catalog.W001). Before the tables exist (a fresh database) there is nothing
to check.
"""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from catalog.models import Tool, ToolPolicy

HINT = "Approve a policy (status active) or reject the tool on /catalog/ or in the admin."


def undecided_tools(using: str = DEFAULT_DB_ALIAS) -> list[tuple[str, str | None]]:
    """(name, policy status) of enabled tools without an active or rejected policy; [] before the tables exist."""
    try:
        return list(
            Tool.objects.using(using)
            .filter(enabled=True)
            .exclude(policy__status__in=[ToolPolicy.Status.ACTIVE, ToolPolicy.Status.REJECTED])
            .values_list("name", "policy__status")
        )
    except DatabaseError:
        return []


def _described(undecided: Iterable[tuple[str, str | None]]) -> str:
    return ", ".join(f"{name} ({status or 'no policy'})" for name, status in undecided)


@register(Tags.database, deploy=True)
def tools_have_a_decided_policy(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """catalog.E001 on `check --deploy`: a deployment should not go live with tools nobody decided."""
    undecided = [tool for alias in databases or [DEFAULT_DB_ALIAS] for tool in undecided_tools(alias)]
    if not undecided:
        return []
    return [
        Error(
            f"{len(undecided)} enabled tool(s) have no active or rejected policy and are denied: "
            f"{_described(undecided)}.",
            hint=HINT,
            id="catalog.E001",
        )
    ]


@register(Tags.database)
def tools_await_a_policy(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """catalog.W002 where Django runs database checks (check --database, migrate): reported, never blocking."""
    undecided = [tool for alias in databases or [] for tool in undecided_tools(alias)]
    if not undecided:
        return []
    return [
        Warning(
            f"{len(undecided)} enabled tool(s) await a policy and are denied until decided: {_described(undecided)}.",
            hint=HINT,
            id="catalog.W002",
        )
    ]


@register(Tags.database)
def tool_schemas_fit_the_token_gate(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    cap = settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS
    oversized: list[tuple[str, int]] = []
    for alias in databases or []:
        try:
            oversized += (
                Tool.objects.using(alias)
                .filter(enabled=True, schema_tokens__gt=cap)
                .values_list("name", "schema_tokens")
            )
        except DatabaseError:
            continue
    return [
        Warning(
            f"Tool {name} has a {tokens}-token schema, over the {cap}-token cap.",
            hint="Split it into staged tools or trim its schema (TOOLHUB_MAX_TOOL_SCHEMA_TOKENS sets the cap).",
            id="catalog.W001",
        )
        for name, tokens in oversized
    ]
