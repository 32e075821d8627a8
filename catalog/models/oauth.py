"""OAuth grants of upstream MCP servers: the tokens toolhub holds for a server that needs OAuth.

One row per server for toolhub's own account (user is null) and one per server and user for servers where each
user signs in with their own account. Tokens are stored encrypted like the servers' other secrets
(catalog.models.secrets) and never shown: pages show who connected, when, the scopes granted and the expiry.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from .secrets import EncryptedJSONField


class McpOAuthGrant(models.Model):
    server = models.ForeignKey("catalog.McpServer", on_delete=models.CASCADE, related_name="oauth_grants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mcp_oauth_grants",
        help_text="Whose account; empty: toolhub's own (used for every call).",
    )
    tokens = EncryptedJSONField(default=dict, help_text="The token response: access and refresh token (encrypted).")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When the access token expires.")
    scope = models.CharField(max_length=1000, blank=True, help_text="The scopes granted.")
    authorization_server = models.JSONField(default=dict, help_text="The authorization server's metadata (RFC 8414).")
    resource_metadata = models.JSONField(
        default=dict, blank=True, help_text="The server's protected resource metadata (RFC 9728), if it has one."
    )
    connected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    connected_at = models.DateTimeField()
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MCP server OAuth grant"
        constraints = [
            models.UniqueConstraint(fields=["server"], condition=Q(user__isnull=True), name="mcp_oauth_grant_toolhub"),
            models.UniqueConstraint(
                fields=["server", "user"], condition=Q(user__isnull=False), name="mcp_oauth_grant_per_user"
            ),
        ]

    def __str__(self):
        return f"{self.server_id}: {self.user_id or 'toolhub'}"
