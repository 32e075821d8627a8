"""Dashboard pages of the catalog: the tool list (with the fail-closed list first) and tool detail."""

import json

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from .deferral import is_deferred
from .models import Tool, ToolPolicy
from .selectors import catalog_schema_tokens, search_tools, tools_needing_policy


@login_required
def catalog_list(request):
    filters = {
        "query": request.GET.get("q", "").strip(),
        "source": request.GET.get("source", ""),
        "policy_status": request.GET.get("policy", ""),
    }
    if filters["source"] not in Tool.Source.values:
        filters["source"] = ""
    if filters["policy_status"] not in [*ToolPolicy.Status.values, "none"]:
        filters["policy_status"] = ""
    tools = list(search_tools(**filters))
    rows = [(tool, getattr(tool, "policy", None), is_deferred(tool)) for tool in tools]
    context = {
        "rows": rows,
        "filters": filters,
        "needs_policy": tools_needing_policy().select_related("policy"),
        "catalog_tokens": catalog_schema_tokens(),
        "token_cap": settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS,
        "oversized": Tool.objects.filter(enabled=True, schema_tokens__gt=settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS),
        "sources": Tool.Source.values,
        "policy_statuses": [*ToolPolicy.Status.values, "none"],
    }
    template = "catalog/catalog.html#tool-table" if request.htmx else "catalog/catalog.html"
    return render(request, template, context)


@login_required
def tool_detail(request, name):
    tool = get_object_or_404(Tool.objects.select_related("policy"), name=name)
    policy = getattr(tool, "policy", None)
    context = {
        "tool": tool,
        "policy": policy,
        "deferred": is_deferred(tool),
        "token_cap": settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS,
        "definition": json.dumps(tool.function_definition(), indent=2, ensure_ascii=False),
    }
    return render(request, "catalog/tool_detail.html", context)
