"""OAuth grants in the database: what the server page's connect flow stores and what connections read.

`upstream_oauth(server)` is what a connection to `server` carries (no query: the store reads when the connection
opens). `save_grant` stores a flow's Grant, `client_settings` reads a server's client configuration, `grant_facts`
is what a page may show (never a token). A client-credentials server gets new tokens here when its token has
expired, since that grant needs no person.
"""

from __future__ import annotations

import datetime
import logging

from asgiref.sync import sync_to_async
from django import db
from django.utils import timezone
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata

from catalog.models import McpOAuthGrant, McpServer

from .auth import EXPIRY_MARGIN_SECONDS, NeedsConnecting, StoredGrant, UpstreamOAuth
from .flow import ClientSettings, Grant, client_credentials
from .http import OAuthProblem

logger = logging.getLogger(__name__)
SERVICE_MODES = (McpServer.OAuth.SERVICE_BROWSER, McpServer.OAuth.SERVICE_CLIENT_CREDENTIALS)


def client_settings(server: McpServer) -> ClientSettings:
    registered: dict = {} if server.oauth_client_id else dict(server.oauth_client or {})  # type: ignore[arg-type]
    secret = str(server.oauth_client_secret or "")
    return ClientSettings(client_id=server.oauth_client_id, client_secret=secret, scope=server.oauth_scope,
                          registered=registered)  # fmt: skip


def _when(timestamp: float | None) -> datetime.datetime | None:
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC) if timestamp else None


def save_grant(server: McpServer, grant: Grant, *, user=None, connected_by=None) -> McpOAuthGrant:
    """Store `grant` as `user`'s (None: toolhub's own) on `server`, replacing an earlier one, and the client it
    was made with on the server (a registered one is reused by the next connect)."""
    now = timezone.now()
    # The client as used (registered, or the pre-registered one with its auth method): refreshes present it.
    client = grant.client.model_dump(mode="json", exclude_none=True)
    server.oauth_client = client  # type: ignore[assignment]  # an EncryptedJSONField holds JSON
    McpServer.objects.filter(pk=server.pk).update(oauth_client=client)  # no other field changes
    row, _ = McpOAuthGrant.objects.update_or_create(  # type: ignore[misc]  # tokens: an EncryptedJSONField
        server=server,
        user=user,
        defaults={
            "tokens": grant.tokens.model_dump(mode="json", exclude_none=True),
            "expires_at": _when(grant.expires_at),
            "scope": grant.scope[:1000],
            "authorization_server": grant.authorization_server.model_dump(mode="json", exclude_none=True),
            "resource_metadata": grant.resource_metadata.model_dump(mode="json", exclude_none=True)
            if grant.resource_metadata else {},
            "connected_by": connected_by,
            "connected_at": now,
            "refreshed_at": None,
        },
    )  # fmt: skip
    return row


def forget_grant(server: McpServer, *, user=None) -> bool:
    deleted, _ = McpOAuthGrant.objects.filter(server=server, user=user).delete()
    return bool(deleted)


def _client_of(server: McpServer) -> OAuthClientInformationFull | None:
    data: dict = dict(server.oauth_client or {})  # type: ignore[arg-type]
    return OAuthClientInformationFull.model_validate(data) if data else None


def _closing(work):
    """`work` run as a request is: in a worker thread of its own, whose database connection closes afterwards.
    catalog.mcp_client.callers.in_worker_thread does the same for callers' answers; catalog.mcp_client imports this
    package, so this one cannot import it."""

    def run(*args):
        try:
            return work(*args)
        finally:
            db.connections.close_all()

    return run


class DatabaseGrantStore:
    """A GrantStore over McpOAuthGrant rows; called on the MCP client's loop thread, so it reads in a worker thread."""

    def __init__(self, server_id: int, name: str, user_id: int | None = None):
        self.server_id, self.user_id = server_id, user_id
        self.label = f"MCP server {name!r}"

    async def load(self) -> StoredGrant | None:
        return await sync_to_async(_closing(self._load), thread_sensitive=False)()

    async def save_tokens(self, tokens: OAuthToken, expires_at: float | None) -> None:
        await sync_to_async(_closing(self._save_tokens), thread_sensitive=False)(tokens, expires_at)

    def _rows(self):
        if self.user_id is None:
            return McpOAuthGrant.objects.filter(server_id=self.server_id, user__isnull=True)
        return McpOAuthGrant.objects.filter(server_id=self.server_id, user_id=self.user_id)

    def _load(self) -> StoredGrant | None:
        row = self._rows().select_related("server").first()
        if row is None or not row.tokens:
            return None
        server = row.server
        expired = row.expires_at is not None and row.expires_at.timestamp() - EXPIRY_MARGIN_SECONDS < time_now()
        if server.oauth == McpServer.OAuth.SERVICE_CLIENT_CREDENTIALS and expired and self.user_id is None:
            try:
                grant = client_credentials(server.url, client_settings(server))
                row = save_grant(server, grant, connected_by=row.connected_by)
            except OAuthProblem as exc:
                logger.warning("%s: new client credentials tokens failed: %s", self.label, exc)
        client = _client_of(server)
        if client is None:
            return None
        return StoredGrant(
            tokens=OAuthToken.model_validate(row.tokens),
            expires_at=row.expires_at.timestamp() if row.expires_at else None,
            client=client,
            authorization_server=OAuthMetadata.model_validate(row.authorization_server),
            resource_metadata=ProtectedResourceMetadata.model_validate(row.resource_metadata)
            if row.resource_metadata else None,
        )  # fmt: skip

    def _save_tokens(self, tokens: OAuthToken, expires_at: float | None) -> None:
        self._rows().update(
            tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=_when(expires_at),
            scope=(tokens.scope or "")[:1000], refreshed_at=timezone.now(),
        )  # fmt: skip


def time_now() -> float:
    return timezone.now().timestamp()


def upstream_oauth(server: McpServer, user=None) -> UpstreamOAuth | None:
    """What a connection to `server` carries for OAuth (no query: its store reads when the connection opens):
    toolhub's own grant on a service-account server; on a per-user server, `user`'s grant, for a connection of that
    user's own (catalog.mcp_client.client asks `for_user` for each per-user connection). None for a server without
    OAuth. Without a user, a per-user server's grant is a placeholder that says why it cannot be used."""
    if not server.oauth or server.transport != McpServer.Transport.STREAMABLE_HTTP:
        return None
    if server.oauth in SERVICE_MODES:
        return UpstreamOAuth(key=f"{server.pk}:toolhub", store=DatabaseGrantStore(server.pk, server.name))
    if user is not None:
        return for_user(upstream_oauth(server), user.pk)
    return UpstreamOAuth(key=f"{server.pk}:per-user", store=_PerUserUnsupported(server.pk, server.name))


def for_user(oauth: UpstreamOAuth | None, user_id: int) -> UpstreamOAuth | None:
    """The grant a connection of user `user_id`'s own carries: that user's on a per-user server, else `oauth`."""
    if oauth is None or not isinstance(oauth.store, _PerUserUnsupported):
        return oauth
    server_id, name = oauth.store.server_id, oauth.store.name
    return UpstreamOAuth(key=f"{server_id}:user:{user_id}", store=DatabaseGrantStore(server_id, name, user_id))


class _PerUserUnsupported:
    """A per-user server's grant on a connection that is no user's own (the shared one, a per-session one, a sync
    or a test connection): no token can be chosen, and the message says what to change."""

    def __init__(self, server_id: int, name: str):
        self.server_id, self.name = server_id, name
        self.label = f"MCP server {name!r}"

    async def load(self) -> StoredGrant | None:
        raise NeedsConnecting(
            f"{self.label} uses each user's own OAuth account, so its calls need a connection per user (set its "
            "Connections to per user) made for a user who connected their account on its page."
        )

    async def save_tokens(self, tokens: OAuthToken, expires_at: float | None) -> None:
        raise AssertionError("a per-user server's shared connection holds no tokens")


def grant_facts(server: McpServer, user) -> dict:
    """What the server's page shows of its OAuth: toolhub's grant, the user's own, how many users connected.
    Grants are returned without their tokens (deferred, never read here)."""
    if not server.oauth:
        return {}
    rows = McpOAuthGrant.objects.filter(server=server).defer("tokens").select_related("connected_by")
    toolhub = next((row for row in rows if row.user_id is None), None)
    own = next((row for row in rows if user is not None and row.user_id == user.pk), None)
    return {"toolhub": toolhub, "own": own, "users": sum(1 for row in rows if row.user_id is not None),
            "per_user": server.oauth == McpServer.OAuth.PER_USER}  # fmt: skip
