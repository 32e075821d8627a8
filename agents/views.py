"""Dashboard pages about conversations: the overview."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from catalog.models import Tool
from catalog.selectors import catalog_schema_tokens, stale_snippets, tools_needing_policy

from .approvals import ApprovalClosed, decide_approval
from .models import RoutingLog, ToolApproval, Turn


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


@require_POST
@login_required
def decide(request, approval_id: int):
    """Approve or deny a pending risky call. decide_approval checks the permission (PermissionDenied -> 403)."""
    get_object_or_404(ToolApproval, pk=approval_id)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "overview"
    decision = request.POST.get("decision")
    if decision not in {"approve", "deny"}:
        messages.error(request, "Choose approve or deny.")
        return redirect(back)
    try:
        approval = decide_approval(approval_id=approval_id, user=request.user, approve=decision == "approve")
    except ApprovalClosed as closed:
        messages.error(request, str(closed))
    else:
        messages.success(request, f"{approval.tool_name}: {approval.status}.")
    return redirect(back)
