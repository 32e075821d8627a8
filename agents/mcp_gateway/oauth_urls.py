"""OAuth 2.1 URLs, in django-oauth-toolkit's namespace (its views reverse their own names).

Metadata at the root (RFC 8414, RFC 9728, also in the form suffixed with /mcp);
the authorization server under /oauth/. What a browser-based client fetches
(metadata, registration, token, revocation) answers any origin (toolhub.cors). Every view first refuses NUL
bytes and malformed identifiers with a 400 (agents.mcp_gateway.oauth_input).
"""

from django.urls import path
from oauth2_provider import views as oauth2_views

from toolhub.cors import any_origin

from . import oauth_views
from .oauth_input import refusing_malformed, refusing_malformed_page

app_name = "oauth2_provider"


def endpoint(view, *, error: str = "invalid_request"):
    """A view a client fetches: any origin may read its answers, malformed input is an OAuth error object."""
    return any_origin(refusing_malformed(view, error=error))


urlpatterns = [
    path(".well-known/oauth-authorization-server", endpoint(oauth2_views.OAuthServerMetadataView.as_view()),
         name="oauth-server-metadata"),
    path(".well-known/oauth-protected-resource", endpoint(oauth2_views.OAuthProtectedResourceMetadataView.as_view()),
         name="oauth-resource-metadata"),
    path(".well-known/oauth-protected-resource/mcp",
         endpoint(oauth2_views.OAuthProtectedResourceMetadataView.as_view()), name="oauth-resource-metadata-mcp"),
    path("oauth/authorize/", refusing_malformed_page(oauth_views.ConsentView.as_view(),
                                                     template=oauth_views.ConsentView.template_name), name="authorize"),
    path("oauth/token/", endpoint(oauth2_views.TokenView.as_view()), name="token"),
    path("oauth/revoke/", endpoint(oauth2_views.RevokeTokenView.as_view()), name="revoke-token"),
    path("oauth/register", endpoint(oauth_views.register, error="invalid_client_metadata"), name="dcr-register"),
]  # fmt: skip
