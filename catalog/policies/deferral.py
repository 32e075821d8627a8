"""Whether a tool's schema is deferred behind the search tool. The seed's rule, exactly.

Never looks at policy (bundle.py does) or at substrings of names.
"""

from django.conf import settings

from catalog.models import Tool


def is_deferred(tool: Tool) -> bool:
    if tool.always_load:
        return False
    if tool.name == settings.TOOLHUB_SEARCH_TOOL:
        return False
    if tool.is_mcp:
        return True
    return bool(tool.should_defer)
