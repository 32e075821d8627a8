"""The signed-in user's own settings: the time zone pages show times in (zones.py chooses it for a request or a
WebSocket; middleware.py activates it per request) and the page that saves it (/account/: forms, views, urls).

Any signed-in user sets their own; no role is needed and nobody sets another's. Imports agents.models only; the
console's consumers import zones.py to render in their viewer's zone.
"""
