"""The archive section of the system prompt: deferred tool names by domain, and how to load them.

Names only, never schemas: a deferred tool costs the prompt its name, not its
definition. Its token count is measured by the caller (bundle.py).
"""

from django.conf import settings


def archive_section(deferred: dict[str, tuple[str, ...]]) -> str:
    if not deferred:
        return ""
    search = settings.TOOLHUB_SEARCH_TOOL
    lines = [
        "## Deferred tools",
        f"These tools exist but are not loaded. Call {search} with what you need "
        f'(or "select:name1,name2") to load them for your next step.',
    ]
    lines += [f"- {domain}: {', '.join(names)}" for domain, names in deferred.items()]
    return "\n".join(lines)
