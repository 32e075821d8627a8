"""OAuth 2.1 URLs, in django-oauth-toolkit's namespace (its views reverse their own names).

Metadata at the root (RFC 8414, RFC 9728, also in the form suffixed with /mcp);
the authorization server under /oauth/. What a browser-based client fetches
(metadata, registration, token, revocation) answers any origin (toolhub.cors).
"""

from django.urls import path
from oauth2_provider import views as oauth2_views

from toolhub.cors import any_origin

from . import oauth_views

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", any_origin(oauth2_views.OAuthServerMetadataView.as_view()),
         name="oauth-server-metadata"),
    path(".well-known/oauth-protected-resource", any_origin(oauth2_views.OAuthProtectedResourceMetadataView.as_view()),
         name="oauth-resource-metadata"),
    path(".well-known/oauth-protected-resource/mcp",
         any_origin(oauth2_views.OAuthProtectedResourceMetadataView.as_view()), name="oauth-resource-metadata-mcp"),
    path("oauth/authorize/", oauth_views.ConsentView.as_view(), name="authorize"),
    path("oauth/token/", any_origin(oauth2_views.TokenView.as_view()), name="token"),
    path("oauth/revoke/", any_origin(oauth2_views.RevokeTokenView.as_view()), name="revoke-token"),
    path("oauth/register", any_origin(oauth_views.register), name="dcr-register"),
]  # fmt: skip
