"""WebSocket URL routes, mounted by toolhub.asgi inside the auth and origin checks."""

from django.urls import path

from . import approvals_socket, consumers

websocket_urlpatterns: list = [
    path("ws/console/", consumers.ConversationListConsumer.as_asgi()),
    path("ws/console/<int:conversation_id>/", consumers.ConversationConsumer.as_asgi()),
    path("ws/overview/", consumers.OverviewConsumer.as_asgi()),
    path("ws/approvals/", approvals_socket.ApprovalsConsumer.as_asgi()),
]
