from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from . import api, views

urlpatterns = [
    path("", views.overview, name="overview"),
    # The API authenticates with bearer keys, not cookies, so CSRF does not apply.
    path("v1/chat/completions", csrf_exempt(api.chat_completions), name="api-chat-completions"),
    path("v1/models", api.models, name="api-models"),
    path("v1/approvals/<int:approval_id>", csrf_exempt(api.approval), name="api-approval"),
    path("approvals/<int:approval_id>/decide", views.decide, name="approval-decide"),
    path("policies/<str:name>/simulate", views.policy_simulation, name="policy-simulate"),
]
