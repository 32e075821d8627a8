"""WebSocket URL routes, mounted by toolhub.asgi inside the auth and origin checks."""

websocket_urlpatterns: list = []
