"""The HTTP auth of a connection to an OAuth upstream: the MCP SDK's OAuthClientProvider over a store of tokens.

The SDK attaches the access token and refreshes it when it expires (storing the new tokens through the store). On
a 401 or a 403 for a missing scope it would start a new authorization, which needs a person at a browser: here a
401 refreshes the token instead (a token the server stopped accepting before its expiry; at most once a minute a
connection), and when that cannot be, or for a 403, it raises NeedsConnecting and the caller says so ("connect it
again on its page"). It never registers a client and never sends a request before a grant exists. A store is
anything with `load` and `save_tokens` (catalog.mcp_oauth.grants keeps them in the database; tests and the
conformance client keep them in memory).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace
from typing import Protocol

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import calculate_token_expiry

from .http import BoundedOAuthTransport

EXPIRY_MARGIN_SECONDS = 30  # refresh this long before the token expires, so a call never carries a dying token
REFUSAL_REFRESH_SECONDS = 60  # at most one refresh a minute for a token the server refused before its expiry


class NeedsConnecting(Exception):
    """No usable token: someone has to connect the server (again) on its page. The message says so."""


@dataclass(frozen=True)
class StoredGrant:
    tokens: OAuthToken
    expires_at: float | None
    client: OAuthClientInformationFull
    authorization_server: OAuthMetadata
    resource_metadata: ProtectedResourceMetadata | None


class GrantStore(Protocol):
    label: str  # "MCP server 'x'", for messages

    async def load(self) -> StoredGrant | None: ...

    async def save_tokens(self, tokens: OAuthToken, expires_at: float | None) -> None: ...


@dataclass(frozen=True)
class UpstreamOAuth:
    """What an Endpoint carries for an OAuth server. Connections compare by `key` only (which grant, not its
    tokens): a refresh keeps the connection, connecting again on the page changes nothing here either (the
    callback closes that process's connection; others reopen theirs when the old token is refused)."""

    key: str
    store: GrantStore = field(compare=False, hash=False, repr=False)

    def http_auth(self, server_url: str) -> StoredGrantAuth:
        return StoredGrantAuth(server_url, self.store)

    def http_transport(self, server_url: str) -> BoundedOAuthTransport:
        """The transport for the connection: what the SDK's OAuth provider reads besides MCP is bounded."""
        return BoundedOAuthTransport(server_url)


class _StoreAsTokenStorage:
    """The SDK's TokenStorage over a GrantStore: only refreshed tokens are written at run time."""

    def __init__(self, store: GrantStore):
        self.store = store

    async def get_tokens(self) -> OAuthToken | None:
        grant = await self.store.load()
        return grant.tokens if grant else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self.store.save_tokens(tokens, calculate_token_expiry(tokens.expires_in))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        grant = await self.store.load()
        return grant.client if grant else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        raise NeedsConnecting(f"{self.store.label} needs toolhub to register again: connect it again on its page.")


class StoredGrantAuth(OAuthClientProvider):
    def __init__(self, server_url: str, store: GrantStore):
        self.store = store
        super().__init__(
            server_url=server_url,
            client_metadata=OAuthClientMetadata(redirect_uris=["http://localhost/unused"]),  # type: ignore[list-item]
            storage=_StoreAsTokenStorage(store),
        )
        self._refused_with = 0  # the status of the latest answer to a request the SDK was given
        self._refused_refresh_at = -float(REFUSAL_REFRESH_SECONDS)  # monotonic: when a refused token was refreshed

    @property  # type: ignore[override]
    def _initialized(self) -> bool:
        """Whether the SDK may use the tokens it holds: not once they expired with no refresh token; then the store
        is read again (client credentials ask for new tokens there, and someone may have connected again)."""
        return self._loaded and (self.context.is_token_valid() or self.context.can_refresh_token())

    @_initialized.setter
    def _initialized(self, loaded: bool) -> None:
        self._loaded = loaded

    async def _initialize(self) -> None:
        """The stored grant with its expiry and metadata (the SDK's own loads tokens only, and refreshes against
        the server's origin without metadata)."""
        grant = await self.store.load()
        if grant is None:
            raise NeedsConnecting(
                f"{self.store.label} needs OAuth and is not connected: connect it on its page (MCP servers)."
            )
        context = self.context
        context.current_tokens = grant.tokens
        context.token_expiry_time = grant.expires_at - EXPIRY_MARGIN_SECONDS if grant.expires_at else None
        context.client_info = grant.client
        context.oauth_metadata = grant.authorization_server
        context.protected_resource_metadata = grant.resource_metadata
        if grant.resource_metadata is not None:
            context.auth_server_url = str(grant.resource_metadata.authorization_servers[0])
        self._initialized = True

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, noting how the server answered the request itself (a 401 or a 403)."""
        flow = super()._auth_flow(request)
        response = None
        try:
            while True:
                outgoing = await flow.asend(response)  # type: ignore[arg-type]
                response = yield outgoing
                if outgoing is request:
                    self._refused_with = response.status_code
        except StopAsyncIteration:
            return

    async def _perform_authorization(self) -> httpx2.Request:
        """What the SDK asks for after a refusal: for a 401, a refresh of the refused token, not a browser's
        authorization; a 403 for a scope needs a person (a refresh keeps the scope)."""
        tokens = self.context.current_tokens
        if self._refused_with != 401 or tokens is None or not tokens.refresh_token or not self.context.client_info:
            raise self._needs_a_person()
        if time.monotonic() - self._refused_refresh_at < REFUSAL_REFRESH_SECONDS:
            raise self._needs_a_person()  # refreshed a moment ago and refused again: a new token will not do
        self._refused_refresh_at = time.monotonic()
        return await self._refresh_token()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        """The answer to `_perform_authorization`'s refresh (this provider never exchanges a code)."""
        if not await self._handle_refresh_response(response):
            raise self._needs_a_person()

    def _needs_a_person(self) -> NeedsConnecting:
        return NeedsConnecting(
            f"{self.store.label} refused toolhub's OAuth token and it could not be refreshed: connect it again on "
            "its page."
        )


class MemoryGrantStore:
    """A GrantStore in memory, for a process that keeps its tokens to itself (the conformance client, tests)."""

    def __init__(self, label: str, grant: StoredGrant | None = None):
        self.label = label
        self.grant = grant

    async def load(self) -> StoredGrant | None:
        return self.grant

    async def save_tokens(self, tokens: OAuthToken, expires_at: float | None) -> None:
        if self.grant is not None:
            self.grant = replace(self.grant, tokens=tokens, expires_at=expires_at)
