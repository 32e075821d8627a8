"""Reads of the tools and their policies used by pages, checks and the policy engine; never writes."""

from django.db.models import Q, QuerySet, Sum

from catalog.models import Tool, ToolPolicy

from .deferral import is_deferred

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
