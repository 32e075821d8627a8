"""Dashboard pages about conversations: the overview, approvals, and the policy simulation (it reads RoutingLogs)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from catalog.decision import RoutingDecision, current_catalog
from catalog.forms import PolicyForm
from catalog.models import Tool
from catalog.policies import Replay, simulate_policy, snapshot_changes
from catalog.selectors import catalog_schema_tokens, stale_snippets, tools_needing_policy

from .approvals import ApprovalClosed, decide_approval
from .models import RoutingLog, ToolApproval, Turn

DEFAULT_REPLAY = 20


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


@login_required
@permission_required("catalog.change_toolpolicy", raise_exception=True)
@require_POST
def policy_simulation(request, name: str):
    """Replay the last N RoutingLogs under the posted draft policy; returns the policy page's simulation part."""
    tool = get_object_or_404(Tool.objects.select_related("policy"), name=name)
    form = PolicyForm(request.POST, policy=getattr(tool, "policy", None), for_simulation=True)
    context = {"tool": tool, "sim_form": form}
    if form.is_valid():
        count = form.cleaned_data["replay"] or DEFAULT_REPLAY
        logs = list(RoutingLog.objects.only("query", "decision", "recommended", "created_at")[:count])
        replays = [Replay(RoutingDecision.from_dict(log.decision), tuple(log.recommended)) for log in logs]
        results = simulate_policy(tool.name, form.draft(), replays, catalog=current_catalog())
        context |= {
            "rows": list(zip(logs, results, strict=True)),
            "changed_count": sum(result.changed for result in results),
            "token_change": sum(result.token_change for result in results),
            "draft_changes": snapshot_changes(form.current, form.draft()),
        }
    template = "catalog/policy_detail.html#simulation" if request.htmx else "catalog/policy_simulation.html"
    return render(request, template, context)
