"""The console's pages: overview, live conversations, the approvals inbox, turn search, a tool's activity, routing
logs, workflows, and an operator's actions on a turn (decide an approval, answer a server's question, cancel it).
Mounted at the root by toolhub.urls."""

from django.urls import path

from catalog.web import converters  # noqa: F401  (registers <tool:...>)

from . import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("console/", views.console_list, name="console"),
    path("console/<int:conversation_id>/", views.console_conversation, name="console-conversation"),
    path("console/search/", views.turn_search, name="turn-search"),
    path("console/tools/<tool:name>/", views.tool_activity_view, name="tool-activity"),
    path("console/turns/<int:turn_id>/cancel", views.cancel_turn, name="turn-cancel"),
    path("console/questions/<int:question_id>/", views.question, name="question"),
    path("routing/", views.routing_list, name="routing"),
    path("routing/<int:log_id>/", views.routing_detail, name="routing-detail"),
    path("workflows/", views.workflow_list, name="workflows"),
    path("workflows/<int:workflow_id>/cancel", views.workflow_cancel, name="workflow-cancel"),
    path("approvals/", views.approvals_inbox, name="approvals"),
    path("approvals/<int:approval_id>/decide", views.decide, name="approval-decide"),
]
