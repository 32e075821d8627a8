"""The Bearer credential of a /mcp request, whichever kind: an API key or an OAuth access token.

Both resolve to the same Credential (user, scopes, the ApiKey it acts as), so
the rules of agents.access.abilities apply to both unchanged: a token acts with its
user's permissions, never more, and only inside its scopes, as a key does.
Never decides what a credential may do; agents.mcp_gateway.access does.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.access.api_keys import authenticate, touch_last_used
from agents.models import ApiKey

from . import oauth


@dataclass(frozen=True)
class Credential:
    """Who a request acts for: the user, the scopes, and the ApiKey it acts as (an OAuth client's own key)."""

    user: object
    scopes: tuple[str, ...]
    api_key: ApiKey
    oauth: bool = False  # an OAuth access token rather than an API key


def authenticate_bearer(token: str, *, resource: str) -> Credential | None:
    """The credential `token` stands for at `resource` (the URL of /mcp as the client reached it), or None."""
    if token.startswith("th_"):
        api_key = authenticate(token)
        return None if api_key is None else Credential(api_key.user, tuple(api_key.scopes), api_key)
    access = oauth.valid_access_token(token, resource=resource)
    if access is None:
        return None
    api_key = oauth.client_key(access.user, access.application)
    if api_key.revoked:
        return None
    touch_last_used(api_key)
    return Credential(access.user, oauth.token_scopes(access, api_key), api_key, oauth=True)
