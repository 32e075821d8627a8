"""OAuth 2.1 URLs, in django-oauth-toolkit's namespace (its views reverse their own names).

Metadata at the root (RFC 8414, RFC 9728, also in the form suffixed with /mcp);
the authorization server under /oauth/.
"""

from django.urls import path
from oauth2_provider import views as oauth2_views

from . import oauth_views

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", oauth2_views.OAuthServerMetadataView.as_view(),
         name="oauth-server-metadata"),
    path(".well-known/oauth-protected-resource", oauth2_views.OAuthProtectedResourceMetadataView.as_view(),
         name="oauth-resource-metadata"),
    path(".well-known/oauth-protected-resource/mcp", oauth2_views.OAuthProtectedResourceMetadataView.as_view(),
         name="oauth-resource-metadata-mcp"),
    path("oauth/authorize/", oauth_views.ConsentView.as_view(), name="authorize"),
    path("oauth/token/", oauth2_views.TokenView.as_view(), name="token"),
    path("oauth/revoke/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register", oauth_views.register, name="dcr-register"),
]  # fmt: skip
