from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from catalog import converters  # noqa: F401  (registers <tool:...>)

from . import api, views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("console/", views.console_list, name="console"),
    path("console/<int:conversation_id>/", views.console_conversation, name="console-conversation"),
    path("console/search/", views.turn_search, name="turn-search"),
    path("console/tools/<tool:name>/", views.tool_activity_view, name="tool-activity"),
    path("routing/", views.routing_list, name="routing"),
    path("routing/<int:log_id>/", views.routing_detail, name="routing-detail"),
    path("workflows/", views.workflow_list, name="workflows"),
    path("workflows/<int:workflow_id>/cancel", views.workflow_cancel, name="workflow-cancel"),
    # The API authenticates with bearer keys, not cookies, so CSRF does not apply.
    path("v1/chat/completions", csrf_exempt(api.chat_completions), name="api-chat-completions"),
    path("v1/openapi.json", api.openapi, name="api-openapi"),
    path("v1/models", api.models, name="api-models"),
    path("v1/models/<str:model_id>", api.model, name="api-model"),
    path("v1/approvals/<int:approval_id>", csrf_exempt(api.approval), name="api-approval"),
    path("approvals/<int:approval_id>/decide", views.decide, name="approval-decide"),
    path("console/turns/<int:turn_id>/cancel", views.cancel_turn, name="turn-cancel"),
    path("policies/<tool:name>/simulate", views.policy_simulation, name="policy-simulate"),
]
