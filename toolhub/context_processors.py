"""Template context shared by every page: the model this instance runs (the default profile's), the navigation."""

from functools import partial

# The dashboard's pages, in menu order: (label, path). The current one is the longest prefix match; the overview's
# "/" only on itself (the account page or a 404 is no section of the menu).
NAVIGATION = (
    ("Overview", "/"),
    ("Console", "/console/"),
    ("Approvals", "/approvals/"),
    ("Catalog", "/catalog/"),
    ("Policies", "/policies/"),
    ("Knowledge", "/knowledge/"),
    ("Routing log", "/routing/"),
    ("Workflows", "/workflows/"),
    ("MCP servers", "/mcp-servers/"),
)


APPROVALS = "/approvals/"  # its entry shows how many approvals wait (a callable: counted only when shown)


def navigation(path: str, user=None) -> list[dict]:
    sections = (href for _, href in NAVIGATION if path.startswith(href) and (href != "/" or path == "/"))
    current = max(sections, key=len, default=None)
    items = [{"label": label, "href": href, "current": href == current} for label, href in NAVIGATION]
    for item in items:
        if item["href"] == APPROVALS and user is not None and user.is_authenticated:
            item["count"] = partial(waiting_count, user)
    return items


def waiting_count(user) -> int:
    from agents.console.approval_inbox import waiting_count

    return waiting_count(user)


def default_model_label() -> str:
    """The default profile's upstream as pages name it (TOOLHUB_MODEL_PROFILE's own model, server or the builtin)."""
    from agents.models import default_profile
    from agents.providers import upstream_of

    return upstream_of(default_profile()).label


def toolhub(request):
    # A callable: the template asks for it (one query) only on pages that show the header.
    return {"toolhub_model_label": default_model_label,
            "toolhub_navigation": navigation(request.path, getattr(request, "user", None))}  # fmt: skip
