"""API keys: `th_<prefix>_<secret>`, stored as a SHA-256 hash, looked up by prefix, compared in constant time.

A key carries scopes (ApiKey.Scope); what it may do is decided by agents.access.abilities.
"""

import datetime
import functools
import hashlib
import hmac
import secrets

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from agents.models import ApiKey
from toolhub.model_rows import fetch_one

LAST_USED_RESOLUTION = datetime.timedelta(minutes=1)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(*, user, name: str, scopes=ApiKey.DEFAULT_SCOPES, list_every_tool: bool = False
                   ) -> tuple[ApiKey, str]:  # fmt: skip
    """Create a key with these scopes (ValidationError for unknown ones); the plain key is returned once only.
    `list_every_tool`: /mcp lists every tool it may call (ApiKey.lists_every_permitted_tool)."""
    prefix = secrets.token_hex(6)
    key = f"th_{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey(name=name, user=user, prefix=prefix, key_hash=_digest(key), scopes=sorted(set(scopes)),
                     lists_every_permitted_tool=list_every_tool)  # fmt: skip
    api_key.clean()
    api_key.save()
    return api_key, key


def authenticate(key: str) -> ApiKey | None:
    """The active key `key` is, with its user loaded, or None (unknown, revoked, wrong secret, inactive user)."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != "th":
        return None
    key_where, user_where = _lookup_sql()
    api_key = fetch_one(ApiKey, key_where, [parts[1], False])
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _digest(key)):
        return None
    user = fetch_one(get_user_model(), user_where, [api_key.user_id])
    if user is None or not user.is_active:
        return None
    api_key.user = user
    touch_last_used(api_key)
    return api_key


@functools.cache
def _lookup_sql() -> tuple[str, str]:
    """(the unrevoked key of a prefix, a user by id), as WHERE clauses: every API request (/v1 and /mcp) reads both,
    so as plain statements (toolhub.model_rows) rather than one queryset with its user joined, whose compilation cost
    more than its query (in-process: see CHANGELOG.md, 2026-12-07)."""
    quote = connection.ops.quote_name
    key_where = f"{quote('prefix')} = %s AND {quote('revoked')} = %s ORDER BY {quote('id')} LIMIT 1"
    user_id = get_user_model()._meta.pk.column
    assert user_id is not None  # a concrete primary key always has its column
    return key_where, f"{quote(user_id)} = %s"


def touch_last_used(api_key: ApiKey) -> None:
    now = timezone.now()
    # At most one write a minute per key: a commit on every request (an MCP call is one) costs more than the call.
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
