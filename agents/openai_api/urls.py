"""The OpenAI-compatible API, mounted at /v1/ by toolhub.urls. It authenticates with bearer keys, not cookies,
so CSRF does not apply to its writes."""

from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from . import views

urlpatterns = [
    path("chat/completions", csrf_exempt(views.chat_completions), name="api-chat-completions"),
    path("openapi.json", views.openapi, name="api-openapi"),
    path("models", views.models, name="api-models"),
    path("models/<str:model_id>", views.model, name="api-model"),
    path("approvals/<int:approval_id>", csrf_exempt(views.approval), name="api-approval"),
]
