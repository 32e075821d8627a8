"""Signing toolhub in to an upstream MCP server's authorization server: authorization code with PKCE (split into
`begin_authorization`, which gives the URL to send the browser to, and `finish_authorization`, which the callback
view calls with what the browser brought back), and client credentials (no browser).

Plain values in, plain values out; no database. The pending authorization (state, PKCE verifier) is the caller's to
keep until the callback, in the signed-in user's session. Registration (RFC 7591) happens here, once per server and
authorization server; a pre-registered client id (and secret) is used as given. Messages name the step and the URL
that failed and never hold a token, a code or a secret.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
from mcp.client.auth.oauth2 import OAuthContext, PKCEParameters, check_registration_usable
from mcp.client.auth.utils import (
    create_client_registration_request,
    credentials_match_issuer,
    get_client_metadata_scopes,
    validate_authorization_response_iss,
)
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)

from .discovery import Discovery, discover, parse_json
from .http import OAuthProblem, new_client, send

GRANT_TYPES = ["authorization_code", "refresh_token"]
_ERROR_CHARS = 200


@dataclass(frozen=True)
class ClientSettings:
    """How toolhub presents itself: a pre-registered client (id, secret) or the one it registered earlier."""

    client_id: str = ""
    client_secret: str = ""
    scope: str = ""  # scopes to ask for; empty: what the server asks for
    registered: dict = field(default_factory=dict)  # an OAuthClientInformationFull toolhub registered before
    client_name: str = "toolhub"


@dataclass(frozen=True)
class Grant:
    """Tokens and what they belong to; `client` is worth keeping for the next connection (and refreshes)."""

    tokens: OAuthToken
    expires_at: float | None  # a Unix time
    client: OAuthClientInformationFull
    authorization_server: OAuthMetadata
    resource_metadata: ProtectedResourceMetadata | None

    @property
    def scope(self) -> str:
        return self.tokens.scope or ""


@dataclass(frozen=True)
class PendingAuthorization:
    """An authorization the browser was sent to; JSON-able (`as_json`) for the session until its callback."""

    authorize_url: str
    state: str
    code_verifier: str
    redirect_uri: str
    server_url: str
    resource: str
    client: dict
    authorization_server: dict
    resource_metadata: dict | None

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> PendingAuthorization:
        return cls(**data)


def _token_auth_method(metadata: OAuthMetadata, has_secret: bool) -> str:
    supported = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]  # RFC 8414's default
    if has_secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in supported:
                return method
    return "none" if "none" in supported or not has_secret else supported[0]


def _register(client: httpx2.Client, found: Discovery, settings: ClientSettings, redirect_uri: str,
              scope: str | None) -> OAuthClientInformationFull:  # fmt: skip
    metadata = found.authorization_server
    if metadata.registration_endpoint is None:
        raise OAuthProblem(
            f"The authorization server {metadata.issuer} offers no dynamic client registration: register a client "
            "for toolhub there and enter its client id (and secret) on this server's page."
        )
    request_metadata = OAuthClientMetadata(
        client_name=settings.client_name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=GRANT_TYPES,
        response_types=["code"],
        token_endpoint_auth_method=_token_auth_method(metadata, has_secret=True),  # type: ignore[arg-type]
        scope=scope,
        application_type="web",
    )
    request = create_client_registration_request(metadata, request_metadata, found.server_url)
    answer = send(client, request, what="Client registration")
    if answer.status not in (200, 201):
        raise OAuthProblem(f"Client registration at {answer.url} answered {answer.status}{_oauth_error(answer.body)}.")
    registered = parse_json(answer, OAuthClientInformationFull, "The client registration answer")
    try:
        check_registration_usable(registered)
    except Exception as exc:
        raise OAuthProblem(f"Client registration at {answer.url}: {exc}.") from None
    registered.issuer = str(metadata.issuer)
    return registered


def _client(client: httpx2.Client, found: Discovery, settings: ClientSettings, redirect_uri: str,
            scope: str | None) -> OAuthClientInformationFull:  # fmt: skip
    metadata = found.authorization_server
    if settings.client_id:
        return OAuthClientInformationFull(
            client_id=settings.client_id,
            client_secret=settings.client_secret or None,
            token_endpoint_auth_method=_token_auth_method(metadata, has_secret=bool(settings.client_secret)),
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
        )
    if settings.registered:
        earlier = OAuthClientInformationFull.model_validate(settings.registered)
        same_redirect = [str(uri) for uri in earlier.redirect_uris or ()] == [redirect_uri]
        if same_redirect and credentials_match_issuer(earlier, str(metadata.issuer), None):
            return earlier
    return _register(client, found, settings, redirect_uri, scope)


def _scope(found: Discovery, settings: ClientSettings) -> str | None:
    if settings.scope:
        return settings.scope
    return get_client_metadata_scopes(found.challenge_scope, found.resource_metadata, found.authorization_server,
                                      GRANT_TYPES)  # fmt: skip


def begin_authorization(server_url: str, settings: ClientSettings, redirect_uri: str) -> PendingAuthorization:
    """Discover, register if needed, and build the authorization URL (PKCE S256, state, resource, scope)."""
    with new_client() as client:
        found = discover(client, server_url)
        scope = _scope(found, settings)
        registered = _client(client, found, settings, redirect_uri, scope)
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    params = {
        "response_type": "code",
        "client_id": registered.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
        "resource": found.resource,
    }
    if scope:
        params["scope"] = scope
        if "offline_access" in scope.split():
            params["prompt"] = "consent"  # OpenID Connect asks for it with offline_access
    endpoint = str(found.authorization_server.authorization_endpoint)
    return PendingAuthorization(
        authorize_url=f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}",
        state=state,
        code_verifier=pkce.code_verifier,
        redirect_uri=redirect_uri,
        server_url=server_url,
        resource=found.resource,
        client=registered.model_dump(mode="json", exclude_none=True),
        authorization_server=found.authorization_server.model_dump(mode="json", exclude_none=True),
        resource_metadata=found.resource_metadata.model_dump(mode="json", exclude_none=True)
        if found.resource_metadata else None,
    )  # fmt: skip


def _oauth_error(body: bytes) -> str:
    """`: error: description` from an OAuth error answer, cut short; '' when it is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return ""
    description = data.get("error_description")
    text = f"{data['error']}: {description}" if isinstance(description, str) else data["error"]
    return f": {text[:_ERROR_CHARS]}"


def _token_request(client: httpx2.Client, metadata: OAuthMetadata, registered: OAuthClientInformationFull,
                   data: dict[str, str], what: str) -> tuple[OAuthToken, float | None]:  # fmt: skip
    context = OAuthContext(server_url="", client_metadata=OAuthClientMetadata(redirect_uris=["http://localhost/"]),  # type: ignore[list-item]
                           storage=None, redirect_handler=None, callback_handler=None,  # type: ignore[arg-type]
                           client_info=registered)  # fmt: skip
    try:
        data, headers = context.prepare_token_auth(data, {"Content-Type": "application/x-www-form-urlencoded"})
    except Exception as exc:
        raise OAuthProblem(f"{what}: {exc}.") from None
    request = httpx2.Request("POST", str(metadata.token_endpoint), data=data, headers=headers)
    answer = send(client, request, what=what)
    if answer.status != 200:
        raise OAuthProblem(f"{what} at {answer.url} was refused ({answer.status}{_oauth_error(answer.body)}).")
    tokens = parse_json(answer, OAuthToken, f"The answer to the {what.lower()}")
    return tokens, (time.time() + tokens.expires_in) if tokens.expires_in else None


def finish_authorization(pending: PendingAuthorization, *, code: str | None, state: str | None, iss: str | None,
                         error: str | None = None, error_description: str | None = None) -> Grant:  # fmt: skip
    """Check what the browser brought back to the callback and exchange the code for tokens."""
    metadata = OAuthMetadata.model_validate(pending.authorization_server)
    if state is None or not secrets.compare_digest(state, pending.state):
        raise OAuthProblem("The authorization answer's state does not match the one toolhub sent; start again.")
    if error:
        detail = f": {error_description[:_ERROR_CHARS]}" if error_description else ""
        raise OAuthProblem(f"The authorization server {metadata.issuer} answered {error[:_ERROR_CHARS]}{detail}.")
    try:
        validate_authorization_response_iss(iss, metadata)
    except Exception as exc:
        raise OAuthProblem(f"The authorization answer came from another issuer: {exc}.") from None
    if not code:
        raise OAuthProblem("The authorization answer holds no code; start again.")
    registered = OAuthClientInformationFull.model_validate(pending.client)
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": pending.redirect_uri,
        "client_id": registered.client_id,
        "code_verifier": pending.code_verifier,
        "resource": pending.resource,
    }
    with new_client() as client:
        tokens, expires_at = _token_request(client, metadata, registered, data, "The token request")
    if tokens.scope is None:
        tokens.scope = _requested_scope(pending.authorize_url)
    found = pending.resource_metadata
    resource_metadata = ProtectedResourceMetadata.model_validate(found) if found else None
    return Grant(tokens, expires_at, registered, metadata, resource_metadata)


def _requested_scope(authorize_url: str) -> str | None:
    scopes = parse_qs(urlsplit(authorize_url).query).get("scope")
    return scopes[0] if scopes else None


def client_credentials(server_url: str, settings: ClientSettings) -> Grant:
    """Tokens for toolhub's own client (client id and secret), no browser: the client_credentials grant."""
    if not (settings.client_id and settings.client_secret):
        raise OAuthProblem("Client credentials need a client id and its secret on this server's page.")
    with new_client() as client:
        found = discover(client, server_url)
        metadata = found.authorization_server
        registered = OAuthClientInformationFull(
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            token_endpoint_auth_method=_token_auth_method(metadata, has_secret=True),
            grant_types=["client_credentials"],
        )
        data = {"grant_type": "client_credentials", "resource": found.resource}
        scope = _scope(found, settings)
        if scope:
            data["scope"] = scope
        tokens, expires_at = _token_request(client, metadata, registered, data, "The client credentials request")
    if tokens.scope is None:
        tokens.scope = scope
    return Grant(tokens, expires_at, registered, metadata, found.resource_metadata)
