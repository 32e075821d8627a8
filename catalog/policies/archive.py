"""The archive section of the system prompt: deferred tool names by domain, and how to load them.

Names only, never schemas: a deferred tool costs the prompt its name, not its
definition. A domain lists at most TOOLHUB_ARCHIVE_MAX_NAMES_PER_DOMAIN names
(the rest are counted and found through search), so a catalog of thousands of
tools cannot fill the context with names. Its token count is measured by the
caller (bundle.py).
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
    cap = settings.TOOLHUB_ARCHIVE_MAX_NAMES_PER_DOMAIN
    for domain, names in deferred.items():
        listed = ", ".join(names[:cap])
        more = f" and {len(names) - cap} more (find them with {search})" if len(names) > cap else ""
        lines.append(f"- {domain}: {listed}{more}")
    return "\n".join(lines)
