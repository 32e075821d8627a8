"""The form that adds or edits an MCP server; validation lives on the model (McpServer.clean) and in
catalog.mcp_client.names (a new prefix must not clash), never here. Saving a new prefix renames the prefixed tools."""

import json

from django import forms
from django.db import transaction

from catalog.mcp_client.names import prefix_renames, rename_tools
from catalog.models import McpServer


class PrettyJSONField(forms.JSONField):
    """JSON in a textarea, shown indented so a list of arguments or an object of headers is easy to edit."""

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class McpServerForm(forms.ModelForm):
    url = forms.URLField(
        label="URL",
        required=False,
        assume_scheme="https",
        max_length=500,
        help_text=McpServer._meta.get_field("url").help_text,
    )

    class Meta:
        model = McpServer
        fields = ["name", "prefix", "transport", "command", "args", "env", "url", "headers", "oauth", "oauth_client_id",
                  "oauth_scope", "connection_scope", "enabled"]  # fmt: skip
        field_classes = {"args": PrettyJSONField, "env": PrettyJSONField, "headers": PrettyJSONField}
        widgets = {
            "args": forms.Textarea(attrs={"rows": 3}),
            "env": forms.Textarea(attrs={"rows": 3}),
            "headers": forms.Textarea(attrs={"rows": 3}),
        }
        labels = {"args": "Arguments", "env": "Environment"}
        help_texts = {
            "args": 'stdio: its arguments, a JSON list of strings, e.g. ["-m", "demo.loyalty_mcp.server"].',
            "env": 'stdio: extra environment variables, a JSON object of strings, e.g. {"API_TOKEN": "..."}.',
            "headers": 'streamable HTTP: request headers, a JSON object, e.g. {"Authorization": "Bearer ..."}.',
        }

    oauth_client_secret = forms.CharField(
        label="OAuth client secret",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text="The pre-registered client's secret, if it has one (stored encrypted, never shown). Empty keeps "
        "the current one; clearing the client id clears it.",
    )
    field_order = ["name", "prefix", "transport", "command", "args", "env", "url", "headers", "oauth",
                   "oauth_client_id", "oauth_client_secret", "oauth_scope", "enabled"]  # fmt: skip

    renames: dict[str, str] = {}

    def _post_clean(self):
        # The model's clean (client credentials need a secret) sees the secret entered now, or the one kept.
        secret = self.cleaned_data.get("oauth_client_secret")
        if secret:
            self.instance.oauth_client_secret = secret
        if not self.cleaned_data.get("oauth_client_id", self.instance.oauth_client_id):
            self.instance.oauth_client_secret = ""
        super()._post_clean()

    def clean_prefix(self):
        prefix = self.cleaned_data["prefix"]
        if prefix and self.instance.pk is not None and prefix != self.instance.prefix:
            self.renames = prefix_renames(self.instance, prefix)  # ValidationError: shown on the field
        return prefix

    @transaction.atomic
    def save(self, commit=True):
        server = super().save(commit=commit)
        if commit:
            self.rename_prefixed_tools(server)
        return server

    def rename_prefixed_tools(self, server: McpServer) -> None:
        """After the row is saved (the admin saves it itself): the prefixed tools take the new prefix."""
        rename_tools(server, self.renames)

    def clean_args(self):
        return self.cleaned_data["args"] if self.cleaned_data["args"] is not None else []

    def clean_env(self):
        return self.cleaned_data["env"] if self.cleaned_data["env"] is not None else {}

    def clean_headers(self):
        return self.cleaned_data["headers"] if self.cleaned_data["headers"] is not None else {}
