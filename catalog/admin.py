from django.contrib import admin

from .models import Domain, KnowledgeSnippet, PolicyVersion, Tool, ToolPolicy
from .policies import record_policy_version


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ("name", "title")
    search_fields = ("name", "title", "description")


class ToolPolicyInline(admin.StackedInline):
    model = ToolPolicy
    extra = 0
    readonly_fields = ("version",)
    filter_horizontal = ("domains",)


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "is_mcp", "always_load", "should_defer", "schema_tokens", "enabled")
    list_filter = ("source", "is_mcp", "always_load", "should_defer", "enabled", "policy__status")
    search_fields = ("name", "description")
    readonly_fields = ("schema_tokens", "schema_hash", "created_at", "updated_at")
    inlines = [ToolPolicyInline]

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # Every policy change made here is recorded as a new version.
        for formset in formsets:
            for policy in formset.new_objects + [obj for obj, _ in formset.changed_objects]:
                record_policy_version(policy, author=request.user, note="edited in admin")


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):
    list_display = ("tool", "operation", "risk", "status", "requires_confirmation", "version")
    list_filter = ("status", "operation", "risk", "requires_confirmation", "domains")
    search_fields = ("tool__name",)
    readonly_fields = ("version",)
    filter_horizontal = ("domains",)
    list_select_related = ("tool",)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        record_policy_version(form.instance, author=request.user, note="edited in admin")


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
