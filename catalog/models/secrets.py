"""Secrets at rest: an MCP server's environment values and headers (API tokens) are stored encrypted.

Fernet (AES-128-CBC + HMAC) with a key derived from SECRET_KEY; keys in
SECRET_KEY_FALLBACKS still decrypt, so SECRET_KEY can be rotated the way
Django rotates it (the next save re-encrypts with the current key). A value
none of the keys opens raises SecretUnreadable naming the fix, never an
empty value that a later save would write back over the secret.
"""

import base64
import functools
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django import forms
from django.conf import settings
from django.db import models

PREFIX = "fernet:"


class SecretUnreadable(Exception):
    pass


def _fernet(secret: str) -> Fernet:
    digest = hashlib.sha256(f"toolhub.secrets:{secret}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _keys() -> MultiFernet:
    return _keys_of(settings.SECRET_KEY, tuple(settings.SECRET_KEY_FALLBACKS))


@functools.lru_cache(maxsize=8)
def _keys_of(secret: str, fallbacks: tuple[str, ...]) -> MultiFernet:
    """The keys derived from `secret` and `fallbacks`, once per process (reading a server's row decrypts four
    fields)."""
    return MultiFernet([_fernet(key) for key in (secret, *fallbacks)])


def encrypt_json(value) -> str:
    return PREFIX + _keys().encrypt(json.dumps(value, ensure_ascii=False).encode()).decode()


def decrypt_json(text: str):
    if not text.startswith(PREFIX):
        return json.loads(text)  # written before encryption; migration 0007 re-saved every row encrypted
    try:
        return json.loads(_keys().decrypt(text.removeprefix(PREFIX).encode()))
    except InvalidToken:
        raise SecretUnreadable(
            "An MCP server secret was encrypted with a SECRET_KEY that is neither the current one nor in "
            "SECRET_KEY_FALLBACKS; put the old key in SECRET_KEY_FALLBACKS (or enter the secret again)."
        ) from None


class EncryptedJSONField(models.TextField):
    """A JSON value stored as a Fernet token in a text column; Python code sees the plain value."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else decrypt_json(value)

    def to_python(self, value):
        return decrypt_json(value) if isinstance(value, str) else value

    def get_prep_value(self, value):
        return None if value is None else encrypt_json(value)

    def formfield(self, **kwargs):
        return models.Field.formfield(self, **{"form_class": forms.JSONField, **kwargs})
