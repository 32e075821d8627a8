"""Reads of the catalog used by pages, checks and the policy engine."""

from django.db.models import Q, QuerySet, Sum

from .knowledge import current_snippets
from .models import Tool, ToolPolicy


def tools_needing_policy() -> QuerySet[Tool]:
    """Enabled tools with no policy, or one still in draft: they are denied (fail closed)."""
    return Tool.objects.filter(enabled=True).filter(Q(policy__isnull=True) | Q(policy__status=ToolPolicy.Status.DRAFT))


def catalog_schema_tokens() -> int:
    """Tokens the full schemas of every enabled tool would cost if all were loaded."""
    return Tool.objects.filter(enabled=True).aggregate(total=Sum("schema_tokens"))["total"] or 0


def search_tools(*, query: str = "", source: str = "", policy_status: str = "") -> QuerySet[Tool]:
    tools = Tool.objects.select_related("policy").prefetch_related("policy__domains")
    if query:
        tools = tools.filter(Q(name__icontains=query) | Q(description__icontains=query))
    if source:
        tools = tools.filter(source=source)
    if policy_status == "none":
        tools = tools.filter(policy__isnull=True)
    elif policy_status:
        tools = tools.filter(policy__status=policy_status)
    return tools


def stale_snippets(today=None) -> list:
    """Knowledge past its review interval, oldest due first (the review queue)."""
    snippets = current_snippets().select_related("domain")
    return sorted((s for s in snippets if s.is_stale(today)), key=lambda s: s.review_due)
