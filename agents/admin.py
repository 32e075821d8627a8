from django.contrib import admin

from .console.forms import ApiKeyForm
from .models import (
    ActionWord,
    ApiKey,
    Conversation,
    IntentExample,
    Message,
    ModelProfile,
    MoodWord,
    RoutingLog,
    Turn,
    TurnEvent,
    Workflow,
)
from .providers import upstream_of


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "upstream", "context_window", "max_output_tokens", "reserved_result_tokens")
    fieldsets = [
        (None, {"fields": ["name"]}),
        ("Upstream model (empty fields use TOOLHUB_MODEL, TOOLHUB_MODEL_BASE_URL, TOOLHUB_MODEL_API_KEY)",
         {"fields": ["upstream_model", "base_url", "api_key_env"]}),
        ("Token budget", {"fields": ["context_window", "max_output_tokens", "reserved_result_tokens"]}),
        ("Prices (for the overview's costs; empty: no cost shown)", {"fields": ["input_price", "output_price"]}),
    ]  # fmt: skip

    @admin.display(description="calls")
    def upstream(self, profile):
        return upstream_of(profile).label


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("role", "content", "tool_call_id", "tokens")


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "model_profile", "updated_at")
    list_select_related = ("owner", "model_profile")
    inlines = [MessageInline]


class TurnEventInline(admin.TabularInline):
    model = TurnEvent
    extra = 0
    fields = ("sequence", "type", "phase", "payload", "created_at")
    readonly_fields = fields


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "status", "model", "created_at", "finished_at")
    list_filter = ("status",)
    list_select_related = ("conversation",)
    inlines = [TurnEventInline]


@admin.register(RoutingLog)
class RoutingLogAdmin(admin.ModelAdmin):
    list_display = ("id", "query", "steward_mode", "fallback", "loaded_schema_tokens", "created_at")
    list_filter = ("fallback", "steward_mode")
    search_fields = ("query",)


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "phase", "status", "owner", "version", "expires_at")
    list_filter = ("kind", "status")
    list_select_related = ("owner",)


@admin.register(ActionWord)
class ActionWordAdmin(admin.ModelAdmin):
    list_display = ("phrase", "action")
    list_filter = ("action",)
    search_fields = ("phrase",)


@admin.register(MoodWord)
class MoodWordAdmin(admin.ModelAdmin):
    """Question and request cues: a question that asks for no action never decides a write."""

    list_display = ("phrase", "mood", "position")
    list_filter = ("mood", "position")
    search_fields = ("phrase",)


@admin.register(IntentExample)
class IntentExampleAdmin(admin.ModelAdmin):
    """Operators teach the router wordings here: a request and the action and domains it wants."""

    list_display = ("text", "action", "domains", "created_at")
    list_filter = ("action",)
    search_fields = ("text",)
    fields = ("text", "action", "domains")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Edit a key's scopes or revoke it. Keys are created with `manage.py create_api_key` (the key is shown once
    there, in the terminal, and never stored)."""

    form = ApiKeyForm
    list_display = ("name", "user", "prefix", "scopes", "revoked", "created_at", "last_used_at")
    list_filter = ("revoked",)
    fields = ("name", "user", "prefix", "scopes", "lists_every_permitted_tool", "revoked", "created_at", "last_used_at")
    readonly_fields = ("user", "prefix", "created_at", "last_used_at")
    list_select_related = ("user",)

    def has_add_permission(self, request):
        return False
