"""Reads of the catalog used by pages, checks and the policy engine; never writes."""

import datetime

from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from .deferral import is_deferred
from .knowledge import current_snippets
from .models import KnowledgeSnippet, Tool, ToolPolicy

# Sort keys of the tool lists: name -> order_by fields.
TOOL_SORTS = {
    "name": ("name",),
    "-tokens": ("-schema_tokens", "name"),
    "tokens": ("schema_tokens", "name"),
    "source": ("source", "name"),
}


def tools_needing_policy() -> QuerySet[Tool]:
    """Enabled tools with no policy, or one still in draft: they are denied (fail closed)."""
    return Tool.objects.filter(enabled=True).filter(Q(policy__isnull=True) | Q(policy__status=ToolPolicy.Status.DRAFT))


def catalog_schema_tokens() -> int:
    """Tokens the full schemas of every enabled tool would cost if all were loaded."""
    return Tool.objects.filter(enabled=True).aggregate(total=Sum("schema_tokens"))["total"] or 0


def search_tools(
    *,
    query: str = "",
    source: str = "",
    policy_status: str = "",
    domain: str = "",
    risk: str = "",
    deferred: bool | None = None,
    sort: str = "name",
) -> list[Tool]:
    """Tools matching every given filter, with their policy and its domains prefetched.

    `deferred` filters with deferral.is_deferred itself (in Python), so the list never
    disagrees with what the bundle does.
    """
    tools = Tool.objects.select_related("policy").prefetch_related("policy__domains")
    if query:
        tools = tools.filter(Q(name__icontains=query) | Q(description__icontains=query))
    if source:
        tools = tools.filter(source=source)
    if policy_status == "none":
        tools = tools.filter(policy__isnull=True)
    elif policy_status:
        tools = tools.filter(policy__status=policy_status)
    if domain:
        tools = tools.filter(policy__domains__name=domain)
    if risk:
        tools = tools.filter(policy__risk=risk)
    tools = tools.order_by(*TOOL_SORTS.get(sort, TOOL_SORTS["name"]))
    if deferred is None:
        return list(tools)
    return [tool for tool in tools if is_deferred(tool) == deferred]


def stale_snippets(today=None) -> list:
    """Knowledge past its review interval, oldest due first (the review queue)."""
    snippets = current_snippets().select_related("domain")
    return sorted((s for s in snippets if s.is_stale(today)), key=lambda s: s.review_due)


def snippets_for_review(
    *, stale_only: bool = True, owner: str = "", domain: str = "", today: datetime.date | None = None
) -> list[KnowledgeSnippet]:
    """Current snippets, most days overdue first; each carries `days_overdue` (negative: not due yet)."""
    today = today or timezone.localdate()
    snippets = current_snippets().select_related("domain", "reviewed_by")
    if owner:
        snippets = snippets.filter(owner=owner)
    if domain:
        snippets = snippets.filter(domain__name=domain)
    rows = []
    for snippet in snippets:
        snippet.days_overdue = (today - snippet.review_due).days
        if snippet.is_stale(today) or not stale_only:
            rows.append(snippet)
    return sorted(rows, key=lambda s: (-s.days_overdue, s.domain.name, s.title))


def snippet_owners() -> list[str]:
    return sorted(set(current_snippets().values_list("owner", flat=True)))
