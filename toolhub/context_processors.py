"""Template context shared by every page: which model this instance runs, the main navigation."""

from django.conf import settings

# The dashboard's pages, in menu order: (label, path). The current one is the longest prefix match.
NAVIGATION = (
    ("Overview", "/"),
    ("Console", "/console/"),
    ("Catalog", "/catalog/"),
    ("Policies", "/policies/"),
    ("Knowledge", "/knowledge/"),
    ("Routing log", "/routing/"),
    ("Workflows", "/workflows/"),
    ("MCP servers", "/mcp-servers/"),
)


def navigation(path: str) -> list[dict]:
    current = max((href for _, href in NAVIGATION if path.startswith(href)), key=len, default=None)
    return [{"label": label, "href": href, "current": href == current} for label, href in NAVIGATION]


def toolhub(request):
    if settings.TOOLHUB_MODEL_PROVIDER == "builtin":
        model_label = "builtin (offline, rule-based)"
    else:
        model_label = f"{settings.TOOLHUB_MODEL} at {settings.TOOLHUB_MODEL_BASE_URL}"
    return {"toolhub_model_label": model_label, "toolhub_navigation": navigation(request.path)}
