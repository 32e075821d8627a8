"""Where a server's authorization server is and what it offers: RFC 9728 protected resource metadata, then RFC 8414
(or OpenID Connect) authorization server metadata, in the order the MCP SDK's client tries them.

Refuses, with a message naming what and where: metadata for another resource than the server's URL, an issuer other
than the one discovery was built from, and endpoints (authorization, token, registration) on another host than the
issuer or over plain HTTP to a host that is not this machine; toolhub sends codes and secrets only there.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_field_from_www_auth,
    issuers_match,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from mcp_types import LATEST_PROTOCOL_VERSION
from pydantic import BaseModel, ValidationError

from .http import Answer, OAuthProblem, send

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
               "clientInfo": {"name": "toolhub", "version": "1"}},
}  # fmt: skip


@dataclass(frozen=True)
class Discovery:
    """What a server's discovery found: enough to register, authorize and ask for tokens."""

    server_url: str
    resource: str  # the RFC 8707 resource indicator to ask tokens for
    authorization_server: OAuthMetadata
    resource_metadata: ProtectedResourceMetadata | None
    challenge_scope: str | None  # the scope the server's 401 asked for


def parse_json(answer: Answer, model: type[BaseModel], what: str):
    """`answer`'s body as `model`, or an OAuthProblem naming the first thing wrong with it."""
    try:
        return model.model_validate_json(answer.body)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ())) or "the document"
        kind = "is not JSON" if error.get("type") == "json_invalid" else f"is not valid ({where}: {error['msg']})"
        raise OAuthProblem(f"{what} at {answer.url} {kind}.") from None


def is_local(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _port(parts) -> int | None:
    return parts.port or {"https": 443, "http": 80}.get(parts.scheme)


def check_endpoint(url: str | None, *, name: str, issuer: str) -> None:
    """`url` must be on the issuer's host, over https unless that host is this machine."""
    if not url:
        return
    parts, issuer_parts = urlsplit(str(url)), urlsplit(issuer)
    if (parts.hostname or "") != (issuer_parts.hostname or "") or _port(parts) != _port(issuer_parts):
        raise OAuthProblem(
            f"The authorization server {issuer} names a {name} on another host ({url}); toolhub sends codes and "
            f"secrets only to the issuer's own host."
        )
    if parts.scheme != "https" and not (parts.scheme == "http" and is_local(parts.hostname or "")):
        raise OAuthProblem(f"The authorization server's {name} {url} is not https; toolhub refuses to use it.")


def challenge(client: httpx2.Client, server_url: str) -> Answer:
    """The server's answer to an initialize request without credentials (a 401 names what it wants)."""
    request = httpx2.Request("POST", server_url, json=_INITIALIZE,
                             headers={"Accept": "application/json, text/event-stream"})  # fmt: skip
    return send(client, request, what="The MCP server", deadline_seconds=5)


def _fetch_resource_metadata(
    client: httpx2.Client, server_url: str, answer: Answer
) -> ProtectedResourceMetadata | None:
    hinted = extract_field_from_www_auth(answer, "resource_metadata") if answer.status in (401, 403) else None  # type: ignore[arg-type]
    for url in build_protected_resource_metadata_discovery_urls(hinted, server_url):
        found = send(client, create_oauth_metadata_request(url), what="Protected resource metadata")
        if found.status == 200:
            metadata = parse_json(found, ProtectedResourceMetadata, "Protected resource metadata")
            expected = resource_url_from_server_url(server_url)
            if not check_resource_allowed(requested_resource=expected, configured_resource=str(metadata.resource)):
                raise OAuthProblem(
                    f"The protected resource metadata at {url} is for {metadata.resource}, not for {expected}; "
                    "toolhub will not ask for tokens for another resource."
                )
            return metadata
        if found.status >= 500 or found.status == 429:
            raise OAuthProblem(f"Protected resource metadata at {url} answered {found.status}; try again later.")
    return None


def _challenge_field(answer: Answer, name: str) -> str | None:
    """A field of the server's WWW-Authenticate challenge (the SDK's parser; it reads only the headers)."""
    if answer.status not in (401, 403):
        return None
    return extract_field_from_www_auth(answer, name)  # type: ignore[arg-type]


def _fetch_authorization_server(client: httpx2.Client, server_url: str, issuer: str | None) -> OAuthMetadata:
    expected = issuer or f"{urlsplit(server_url).scheme}://{urlsplit(server_url).netloc}"
    tried = []
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
        found = send(client, create_oauth_metadata_request(url), what="Authorization server metadata")
        if found.status == 200:
            metadata = parse_json(found, OAuthMetadata, "Authorization server metadata")
            if not issuers_match(str(metadata.issuer), expected):
                raise OAuthProblem(
                    f"The authorization server metadata at {url} names the issuer {metadata.issuer}, not {expected}."
                )
            for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
                check_endpoint(getattr(metadata, name), name=name, issuer=str(metadata.issuer))
            return metadata
        tried.append(f"{url} ({found.status}{' to ' + found.redirected_to if found.redirected_to else ''})")
        if found.status >= 500:
            break
    if issuer is None:  # the 2025-03-26 fallback: the endpoints at the server's own origin
        return OAuthMetadata.model_validate({
            "issuer": expected,
            "authorization_endpoint": urljoin(expected, "/authorize"),
            "token_endpoint": urljoin(expected, "/token"),
            "registration_endpoint": urljoin(expected, "/register"),
        })  # fmt: skip
    raise OAuthProblem(f"No authorization server metadata for {expected}: tried {', '.join(tried)}.")


def discover(client: httpx2.Client, server_url: str) -> Discovery:
    answer = challenge(client, server_url)
    resource_metadata = _fetch_resource_metadata(client, server_url, answer)
    issuer = None
    if resource_metadata is not None and resource_metadata.authorization_servers:
        issuer = str(resource_metadata.authorization_servers[0])
    authorization_server = _fetch_authorization_server(client, server_url, issuer)
    resource = resource_url_from_server_url(server_url)
    if resource_metadata is not None and resource_metadata.resource:
        resource = str(resource_metadata.resource)
    scope = _challenge_field(answer, "scope")
    return Discovery(server_url, resource, authorization_server, resource_metadata, scope)
