"""OAuth 2.1 for /mcp: what an access token of toolhub's authorization server (django-oauth-toolkit) may do.

The library issues, stores, rotates and revokes the tokens; this module reads
one. An access token acts for its user, with that user's live permissions
(agents.access.abilities: roles, never copied into the token), inside its OAuth scopes,
which are the API-key scopes /mcp reads (`mcp`, `read`). Each (user, client)
pair acts as one ApiKey of its own (`oauth_application` set, no secret): tools
it found through tool_search, its rate limit and its last use are kept there,
and an admin revokes or narrows a client by revoking or narrowing that key.

Also checks client registration metadata (RFC 7591): public clients of the
authorization-code flow, redirect URIs on https or on the loopback interface.
Never issues a token, never reads a password.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.urls import reverse
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.www_authenticate import build_bearer_challenge

from agents.models import ApiKey

Scope = ApiKey.Scope
OAUTH_SCOPES = (Scope.MCP, Scope.READ)  # what a token may carry (settings.OAUTH2_PROVIDER["SCOPES"])
MCP_SCOPE = Scope.MCP  # what a client is told to ask for: everything its user's role allows over /mcp
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}
CLIENT_GRANT_TYPES = ("authorization_code", "refresh_token")
CLIENT_KEY_PREFIX = "oauth-"  # an OAuth client's key; `th_oauth-…` never authenticates (the key has no secret)


def client_key(user, application) -> ApiKey:
    """The ApiKey `application` acts as for `user`; made on first use (one per pair: a unique constraint)."""
    found = ApiKey.objects.filter(user=user, oauth_application=application).first()
    if found is not None:
        return found
    label = application.name or application.client_id
    try:
        with transaction.atomic():
            return ApiKey.objects.create(
                user=user,
                oauth_application=application,
                name=f"OAuth: {label}"[:100],
                prefix=f"{CLIENT_KEY_PREFIX}{secrets.token_hex(5)}",
                key_hash="",  # no secret: the OAuth client's access tokens stand for this key
                scopes=list(OAUTH_SCOPES),
            )
    except IntegrityError:  # another request made it first
        return ApiKey.objects.get(user=user, oauth_application=application)


def valid_access_token(token: str, *, resource: str):
    """The library's AccessToken for `token` when it may be used at `resource` (the /mcp URL asked); else None.

    None for an unknown, expired or revoked token, one without a user (the library's registration tokens) or of an
    inactive user, and one restricted (RFC 8707 `resource`) to another resource. A token issued without a resource
    is accepted: toolhub's authorization server serves no other resource server, so it can only be meant for this.
    """
    checksum = hashlib.sha256(token.encode()).hexdigest()
    access = (
        get_access_token_model().objects.select_related("user", "application").filter(token_checksum=checksum).first()
    )
    if access is None or access.is_expired() or access.user is None or access.application is None:
        return None
    if not access.user.is_active or (access.resource and not access.allows_audience(resource)):
        return None
    return access


def token_scopes(access, api_key: ApiKey) -> tuple[str, ...]:
    """The API-key scopes a token acts with: those it was granted, within its client key's (an admin narrows it)."""
    return tuple(scope for scope in OAUTH_SCOPES if scope in access.scopes and scope in api_key.scopes)


# --- dynamic client registration (RFC 7591) ---------------------------------------------------------------------


@dataclass(frozen=True)
class RegistrationRefused:
    """An RFC 7591 §3.2.2 error: `error` is invalid_redirect_uri or invalid_client_metadata."""

    error: str
    description: str


def redirect_uri_problem(uri) -> str | None:
    """Why `uri` cannot be a redirect URI here (https anywhere, or http on the loopback interface), or None."""
    if not isinstance(uri, str) or not uri:
        return "each redirect URI must be a non-empty string"
    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unclosed [IPv6 address
        return f"{uri}: not a valid URI"
    if parts.fragment or "#" in uri:
        return f"{uri}: a redirect URI must not have a fragment"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return None
    return f"{uri}: use https, or http on localhost, 127.0.0.1 or [::1]"


def registration_refusal(metadata) -> RegistrationRefused | None:
    """Why toolhub will not register a client with this metadata, or None: it then registers a public client."""
    if not isinstance(metadata, dict):
        return RegistrationRefused("invalid_client_metadata", "The body must be a JSON object of client metadata.")
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        return RegistrationRefused("invalid_redirect_uri", "redirect_uris must be a non-empty array of URIs.")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            return RegistrationRefused("invalid_redirect_uri", problem)
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or "authorization_code" not in grant_types:
        return RegistrationRefused("invalid_client_metadata", "grant_types must include authorization_code.")
    unsupported = sorted(set(map(str, grant_types)) - set(CLIENT_GRANT_TYPES))
    if unsupported:
        return RegistrationRefused(
            "invalid_client_metadata",
            f"Unsupported grant_types: {', '.join(unsupported)} (supported: {', '.join(CLIENT_GRANT_TYPES)}).",
        )
    response_types = metadata.get("response_types", ["code"])
    if not isinstance(response_types, list) or set(map(str, response_types)) - {"code"}:
        return RegistrationRefused("invalid_client_metadata", 'response_types may only be ["code"].')
    name = metadata.get("client_name", "")
    if not isinstance(name, str) or len(name) > 255:
        return RegistrationRefused("invalid_client_metadata", "client_name must be a string of at most 255 characters.")
    return None


def register_client(metadata: dict):
    """A public authorization-code client for metadata that registration_refusal accepted.

    Whatever token_endpoint_auth_method was asked for, the client is public ("none", RFC 7591 §3.2.1 lets the
    server choose): it proves itself with PKCE, and holds no secret that could leak from a user's machine.
    """
    Application = get_application_model()
    application = Application(
        name=metadata.get("client_name", ""),
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(metadata["redirect_uris"]),
        registration_source=Application.RegistrationSource.DCR,
    )
    application.full_clean()
    application.save()
    return application


def registration_response(application) -> dict:
    """The RFC 7591 §3.2.1 answer: the client id and the metadata as registered."""
    data = {
        "client_id": application.client_id,
        "client_id_issued_at": int(application.created.timestamp()),
        "redirect_uris": application.redirect_uris.split(),
        "grant_types": list(CLIENT_GRANT_TYPES),
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": " ".join(OAUTH_SCOPES),
    }
    if application.name:
        data["client_name"] = application.name
    return data


# --- /mcp as a protected resource (RFC 9728) -------------------------------------------------------------------

MCP_PATH = "/mcp"
RESOURCE_METADATA_URL = "oauth2_provider:oauth-resource-metadata-mcp"


def mcp_resource(request) -> str:
    """The resource identifier of /mcp as the request reached it (RFC 8707; the metadata's `resource`)."""
    return request.build_absolute_uri(MCP_PATH)


def bearer_challenge(request, *, error: str = "", description: str = "") -> str:
    """The WWW-Authenticate value of a 401 from /mcp: where the resource metadata is and which scope to ask for."""
    attributes = {"error": error, "error_description": description} if error else {}
    attributes["scope"] = MCP_SCOPE
    return build_bearer_challenge(request, attributes, resource_metadata_url=request.build_absolute_uri(
        reverse(RESOURCE_METADATA_URL)))  # fmt: skip
