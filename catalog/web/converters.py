"""URL converters: a tool name in a path is printable text without '/', so %00 or a newline is a 404, not a 500.

Importing this module registers them (`<tool:name>`); every urls.py that uses one imports it.
"""

from django.urls import register_converter


class ToolNameConverter:
    # Anything but '/', control characters and DEL: wider than a stored name (catalog.models.schemas), so an unknown
    # name still reaches the view's 404; never a byte the database or a template cannot take.
    regex = "[^/\x00-\x1f\x7f]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ToolNameConverter, "tool")
