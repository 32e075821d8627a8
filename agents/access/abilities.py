"""Who may do what with conversations and tools: one rule for the dashboard, the API (/v1) and /mcp.

An ability needs a model permission of the acting user (toolhub.roles grants
them by role: a viewer reads; an operator also starts turns and calls tools;
an admin holds everything) and, when the request carries an API key or an
OAuth access token (same scopes), one of the scopes the ability lists. A key
acts with its owner's permissions, never more, and only inside its scopes; a
dashboard session has no scopes to check.
Object-level rules (who may decide which approval) stay with their logic
(agents.turns.approvals.may_decide). Never reads group names, never writes.
"""

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from agents.models import ApiKey

Scope = ApiKey.Scope


@dataclass(frozen=True)
class Ability:
    verb: str  # what it is, in words that read after "may not": "start a turn"
    permission: str | None  # the user's model permission it needs; None: any active signed-in user
    scopes: frozenset[str]  # an API key needs one of these


LIST_MODELS = Ability("list the models", "agents.view_modelprofile", frozenset({Scope.CHAT, Scope.READ}))
# Starting a turn and calling a tool directly over /mcp run the same tools, so they need the same permission.
START_TURN = Ability("start a turn", "agents.add_turn", frozenset({Scope.CHAT}))
DECIDE_APPROVAL = Ability("decide an approval", None, frozenset({Scope.CHAT}))
# An MCP server's question during a turn's tool call (agents.turns.questions) is answered by whoever may approve calls.
ANSWER_QUESTION = Ability("answer an MCP server's question", "agents.decide_toolapproval", frozenset({Scope.CHAT}))
USE_MCP = Ability("use /mcp (list tools)", "catalog.view_tool", frozenset({Scope.MCP, Scope.READ}))
CALL_TOOL = Ability("call a tool", "agents.add_turn", frozenset({Scope.MCP}))


@dataclass(frozen=True)
class Refusal:
    """Why an ability was refused; `missing_scopes` is set when the key's scopes, not the user, were the reason."""

    message: str
    missing_scopes: frozenset[str] = frozenset()


def refusal(user, ability: Ability, *, scopes: Iterable[str] | None = None, holder: str = "API key") -> Refusal | None:
    """None when `user` (with the `scopes` of an API key or OAuth token, or None for a session) may do `ability`;
    else why not. `holder` names what carries the scopes in the answer ("API key", "access token")."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Refusal(f"Sign in to {ability.verb}.")
    if scopes is not None and not ability.scopes & set(scopes):
        needed = " or ".join(sorted(ability.scopes))
        held = ", ".join(sorted(scopes)) or "none"
        return Refusal(f"This {holder} may not {ability.verb}: it needs the scope {needed} (it has {held}).",
                       missing_scopes=ability.scopes)  # fmt: skip
    if ability.permission and not user.has_perm(ability.permission):
        return Refusal(f"{user.get_username()} may not {ability.verb} (needs the {ability.permission} permission).")
    return None


def read_permissions(user) -> None:
    """Read an active user's model permissions (their own and their groups') in one query, into the cache that
    Django's ModelBackend keeps on the user object and reads first (`_perm_cache`, the same set it would build from
    two queries). For a request that loads its user and checks several abilities (agents.mcp_gateway.access): one
    plain statement, since a queryset of these joins costs more to compile than to run (every /mcp request)."""
    if not user.is_active or hasattr(user, "_perm_cache"):
        return
    every, held = _permissions_sql()
    sql, params = (every, []) if user.is_superuser else (held, [user.pk, user.pk])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        user._perm_cache = {f"{app}.{codename}" for app, codename in cursor.fetchall()}


@functools.cache
def _permissions_sql() -> tuple[str, str]:
    """SELECTs of (app label, codename): of every permission (a superuser's), and of those a user holds directly or
    through a group (the user's id twice): django.contrib.auth's tables, and the many-to-many tables Django made for
    the project's user model."""
    quote = connection.ops.quote_name
    user_model = get_user_model()
    own, groups = user_model._meta.get_field("user_permissions"), user_model._meta.get_field("groups")
    granted = Group._meta.get_field("permissions")
    permission_id = quote("id")
    every = (
        f"SELECT DISTINCT ct.{quote('app_label')}, p.{quote('codename')} FROM {quote(Permission._meta.db_table)} p "
        f"JOIN {quote(ContentType._meta.db_table)} ct ON ct.{quote('id')} = p.{quote('content_type_id')}"
    )
    held = (
        f"{every} WHERE p.{permission_id} IN (SELECT {quote(own.m2m_reverse_name())} FROM {quote(own.m2m_db_table())} "
        f"WHERE {quote(own.m2m_column_name())} = %s) "
        f"OR p.{permission_id} IN (SELECT gp.{quote(granted.m2m_reverse_name())} "
        f"FROM {quote(granted.m2m_db_table())} gp JOIN {quote(groups.m2m_db_table())} ug "
        f"ON ug.{quote(groups.m2m_reverse_name())} = gp.{quote(granted.m2m_column_name())} "
        f"WHERE ug.{quote(groups.m2m_column_name())} = %s)"
    )
    return every, held


def allows(user, ability: Ability, *, scopes: Iterable[str] | None = None) -> bool:
    return refusal(user, ability, scopes=scopes) is None
