"""API keys: `th_<prefix>_<secret>`, stored as a SHA-256 hash, looked up by prefix, compared in constant time."""

import hashlib
import hmac
import secrets

from django.utils import timezone

from .models import ApiKey


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(*, user, name: str) -> tuple[ApiKey, str]:
    """Create a key; the plain key is returned once and never stored."""
    prefix = secrets.token_hex(6)
    key = f"th_{prefix}_{secrets.token_urlsafe(32)}"
    return ApiKey.objects.create(name=name, user=user, prefix=prefix, key_hash=_digest(key)), key


def authenticate(key: str) -> ApiKey | None:
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != "th":
        return None
    api_key = ApiKey.objects.select_related("user").filter(prefix=parts[1], revoked=False).first()
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _digest(key)) or not api_key.user.is_active:
        return None
    ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=timezone.now())
    return api_key
