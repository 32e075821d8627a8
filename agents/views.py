"""Dashboard pages about conversations: the overview."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from catalog.models import Tool
from catalog.selectors import catalog_schema_tokens, stale_snippets, tools_needing_policy

from .models import RoutingLog, Turn


@login_required
def overview(request):
    context = {
        "tool_count": Tool.objects.filter(enabled=True).count(),
        "needs_policy_count": tools_needing_policy().count(),
        "catalog_tokens": catalog_schema_tokens(),
        "turns_running": Turn.objects.filter(status=Turn.Status.RUNNING).count(),
        "turns_total": Turn.objects.count(),
        "routing_logs": RoutingLog.objects.only("query", "fallback", "loaded_schema_tokens", "created_at")[:10],
        "stale_snippet_count": len(stale_snippets()),
    }
    return render(request, "agents/overview.html", context)
