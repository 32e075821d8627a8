from django.contrib import admin, messages
from django.db import models, transaction

from .models import Domain, KnowledgeSnippet, McpServer, PolicyVersion, Tool, ToolPolicy
from .web.mcp_forms import McpServerForm


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ("name", "title")
    search_fields = ("name", "title", "description")


class ReadOnlyPolicy:
    """Policies are shown here, never edited: a change goes through the policy pages, which version it and hold a
    loosening of a high-risk tool for a second operator (catalog/policies/four_eyes.py); an edit here skipped both."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ToolPolicyInline(ReadOnlyPolicy, admin.StackedInline):
    model = ToolPolicy
    extra = 0


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "is_mcp", "always_load", "should_defer", "schema_tokens", "enabled")
    list_filter = ("source", "is_mcp", "always_load", "should_defer", "enabled", "policy__status")
    search_fields = ("name", "description")
    readonly_fields = ("schema_tokens", "schema_hash", "created_at", "updated_at")
    inlines = [ToolPolicyInline]


@admin.register(ToolPolicy)
class ToolPolicyAdmin(ReadOnlyPolicy, admin.ModelAdmin):
    list_display = ("tool", "operation", "risk", "status", "requires_confirmation", "version")
    list_filter = ("status", "operation", "risk", "requires_confirmation", "domains")
    search_fields = ("tool__name",)
    list_select_related = ("tool",)


@admin.register(PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin):
    list_display = ("policy", "number", "author", "created_at", "note")
    list_select_related = ("policy__tool", "author")
    readonly_fields = ("policy", "number", "snapshot", "author", "note", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(KnowledgeSnippet)
class KnowledgeSnippetAdmin(admin.ModelAdmin):
    list_display = ("title", "domain", "action", "owner", "last_reviewed", "review_interval_days", "version")
    list_filter = ("domain", "action")
    search_fields = ("title", "text", "owner", "source")


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    list_display = ("name", "transport", "connection_scope", "enabled", "status", "last_synced_at", "tool_count")
    list_filter = ("transport", "connection_scope", "enabled", "status")
    search_fields = ("name", "command", "url")
    readonly_fields = ("status", "status_message", "last_synced_at", "tool_names", "missing_tool_names")
    form = McpServerForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @transaction.atomic
    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        form.rename_prefixed_tools(obj)  # a new prefix renames the prefixed tools, as on the MCP servers page

    actions = ["sync_now"]

    @admin.display(description="tools")
    def tool_count(self, server):
        return len(server.tool_names)

    @admin.action(description="Sync the selected MCP servers now", permissions=["change"])
    def sync_now(self, request, queryset):
        # Imported here: the MCP SDK is only loaded by processes that talk to servers.
        from .mcp_client.sync import sync_server

        for server in queryset:
            result = sync_server(server)
            level = messages.SUCCESS if result.ok else messages.ERROR
            self.message_user(request, f"MCP server {server.name}: {result.summary()}", level=level)
