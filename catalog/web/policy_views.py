"""Dashboard pages of tool policies: the list, the editor (save, simulate), rollback, the four-eyes decision on a
pending change, and whether a tool is always loaded.

Every view needs a login and catalog.view_toolpolicy; every write catalog.change_toolpolicy (403 otherwise,
whatever the method or htmx header). Logic lives in catalog.policies (versions, four_eyes) and forms.
"""

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from catalog.models import PolicyChangeRequest, Tool, ToolPolicy
from catalog.policies.decision import current_catalog
from catalog.policies.four_eyes import (
    ChangeRequestClosed,
    decide_change,
    loosening,
    may_approve,
    pending_changes,
    request_change,
)
from catalog.policies.selectors import tools_needing_policy
from catalog.policies.sidestep import sidesteps
from catalog.policies.versions import (
    PolicyConflict,
    recent_replays,
    rollback_policy,
    save_policy_draft,
    simulate_policy,
    snapshot,
    snapshot_changes,
    summarize_simulation,
    version_history,
)

from .forms import AlwaysLoadForm, PolicyForm, routing_warning
from .views import tool_list_context

audit = logging.getLogger("toolhub.audit")

VIEW_POLICY = "catalog.view_toolpolicy"
EDIT_POLICY = "catalog.change_toolpolicy"
DEFAULT_REPLAY = 20  # logged requests a policy simulation replays unless the form asks for another number


@login_required
@permission_required(VIEW_POLICY, raise_exception=True)
@require_safe
def policy_list(request):
    context = tool_list_context(request) | {"can_edit": request.user.has_perm(EDIT_POLICY)}
    if not request.htmx:
        context["pending_changes"] = list(pending_changes())
        context["awaiting_review"] = tools_needing_policy().count()
    template = "catalog/policies.html#policy-table" if request.htmx else "catalog/policies.html"
    return render(request, template, context)


@login_required
@permission_required(VIEW_POLICY, raise_exception=True)
@require_http_methods(["GET", "POST"])
def policy_detail(request, name):
    """The policy, its editor (for editors), the change waiting for a second operator, and its history.

    POST saves a new version, or, for a change that loosens a tool under four eyes, a pending change that applies
    when another operator approves it (catalog.policies.four_eyes)."""
    tool = get_object_or_404(Tool.objects.select_related("policy"), name=name)
    policy = getattr(tool, "policy", None)
    can_edit = request.user.has_perm(EDIT_POLICY)
    form = None
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied
        form = PolicyForm(request.POST, policy=policy)
        if form.is_valid():
            draft, note, base = form.draft(), form.cleaned_data["note"], form.cleaned_data["base_version"]
            reasons = loosening(form.current, draft)
            try:
                if reasons:
                    request_change(tool, draft=draft, reasons=reasons, author=request.user, note=note,
                                   base_version=base)  # fmt: skip
                else:
                    version = save_policy_draft(tool, draft=draft, author=request.user, note=note, base_version=base)
            except (PolicyConflict, ChangeRequestClosed) as refused:
                form.add_error(None, str(refused))
            else:
                if reasons:
                    messages.warning(request, f"The change {'; '.join(reasons)}: it is saved as pending and applies "
                                              "when another operator approves it.")  # fmt: skip
                else:
                    messages.success(request, saved_message(tool, version.number, draft["status"]))
                    if warning := routing_warning(draft):
                        messages.warning(request, warning)
                return redirect("policy-detail", name=tool.name)
    elif can_edit:
        form = PolicyForm(policy=policy)
    return render(request, "catalog/policy_detail.html", _policy_context(request, tool, policy, form, can_edit))


def saved_message(tool: Tool, number: int, status: str) -> str:
    """The version saved is the current one whatever its status; only an active status lets routing offer the tool."""
    label = ToolPolicy.Status(status).label
    effect = "routing may offer the tool" if status == ToolPolicy.Status.ACTIVE else "the tool is refused everywhere"
    return f"Saved version {number} of {tool.name}'s policy; it is the current version, status {label}: {effect}."


def _policy_context(request, tool: Tool, policy: ToolPolicy | None, form, can_edit: bool) -> dict:
    changes = list(tool.policy_change_requests.select_related("requested_by", "decided_by")[:20])
    pending = next((change for change in changes if change.status == PolicyChangeRequest.Status.PENDING), None)
    return {
        "tool": tool,
        "policy": policy,
        "form": form,
        "can_edit": can_edit,
        "history": version_history(policy) if policy is not None else [],
        "rollbacks": list(policy.rollbacks.select_related("actor")[:20]) if policy is not None else [],
        "routing_warning": routing_warning(snapshot(policy)) if policy is not None else "",
        "always_load_form": AlwaysLoadForm(initial={"always_load": tool.always_load}),
        "pending": pending,
        "pending_changes": snapshot_changes(snapshot(policy) if policy else None, pending.draft) if pending else [],
        "may_approve_pending": can_edit and pending is not None and may_approve(request.user, pending),
        "change_requests": changes,
    }


@login_required
@permission_required(EDIT_POLICY, raise_exception=True)
@require_POST
def policy_change_decide(request, name: str, pk: int):
    """Approve (apply as a new version) or reject a pending policy change; its requester may only reject it (403,
    four_eyes.SameOperator, whose page says why)."""
    change = get_object_or_404(PolicyChangeRequest, pk=pk, tool__name=name)
    back = request.POST.get("next", "")  # the approvals inbox sends its own address
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("policy-detail", args=[name])
    decision = request.POST.get("decision")
    if decision not in {"approve", "reject"}:
        messages.error(request, "Choose approve or reject.")
        return redirect(back)
    try:
        change = decide_change(change_id=change.pk, user=request.user, approve=decision == "approve")
    except (ChangeRequestClosed, PolicyConflict) as refused:
        messages.error(request, str(refused))
    else:
        if change.status == PolicyChangeRequest.Status.APPLIED:
            messages.success(request, f"Approved: version {change.version} of {name}'s policy is active.")
        else:
            messages.success(request, f"Rejected: {name}'s policy stays as it is.")
    return redirect(back)


@login_required
@permission_required(EDIT_POLICY, raise_exception=True)
@require_POST
def policy_always_load(request, name: str):
    """Load the tool's schema into every request its policy allows it in (never deferred behind tool_search), or
    stop. Changes loading only: policy still decides whether the tool is offered at all."""
    tool = get_object_or_404(Tool, name=name)
    form = AlwaysLoadForm(request.POST)
    form.is_valid()  # a boolean: anything but a true value is False
    always_load = form.cleaned_data.get("always_load", False)
    if always_load != tool.always_load:
        Tool.objects.filter(pk=tool.pk).update(always_load=always_load)
        audit.info("%s: always load %s, by %s", tool.name, "on" if always_load else "off", request.user)
    loading = "always loaded" if always_load else "loaded or deferred as routing decides"
    messages.success(request, f"{tool.name} is {loading} wherever its policy allows it.")
    return redirect("policy-detail", name=name)


@login_required
@permission_required(EDIT_POLICY, raise_exception=True)
@require_POST
def policy_simulation(request, name: str):
    """Replay the last N logged requests (their decisions and the tools they called) under the posted draft policy,
    and name the permitted tools that return what the draft restricts; returns the policy page's simulation part."""
    tool = get_object_or_404(Tool.objects.select_related("policy"), name=name)
    form = PolicyForm(request.POST, policy=getattr(tool, "policy", None), for_simulation=True)
    context = {"tool": tool, "sim_form": form}
    if form.is_valid():
        count = form.cleaned_data["replay"] or DEFAULT_REPLAY
        replays = recent_replays(count)
        catalog, draft = current_catalog(), form.draft()
        results = simulate_policy(tool.name, draft, replays, catalog=catalog)
        context |= {
            "rows": list(zip(replays, results, strict=True)),
            "summary": summarize_simulation(results),
            "draft_changes": snapshot_changes(form.current, draft),
            "sidesteps": sidesteps(tool.name, draft, catalog),
        }
    template = "catalog/policy_detail.html#simulation" if request.htmx else "catalog/policy_simulation.html"
    return render(request, template, context)


@login_required
@permission_required(EDIT_POLICY, raise_exception=True)
@require_http_methods(["GET", "POST"])
def policy_rollback(request, name, number):
    """GET: confirm (what would change); POST: move the active pointer to version `number`, or, when that loosens a
    tool under four eyes, ask a second operator for it (a pending change)."""
    policy = get_object_or_404(ToolPolicy.objects.select_related("tool"), tool__name=name)
    version = get_object_or_404(policy.versions, number=number)
    reasons = loosening(snapshot(policy), version.snapshot)
    if request.method == "POST":
        if not reasons:
            rollback_policy(policy, number=version.number, user=request.user)
            messages.success(request, f"Version {version.number} is the current version again (rolled back by "
                                      f"{request.user.get_username()}).")  # fmt: skip
            return redirect("policy-detail", name=name)
        try:
            request_change(policy.tool, draft=version.snapshot, reasons=reasons, author=request.user,
                           note=f"Roll back to v{version.number}", base_version=policy.version)  # fmt: skip
        except (PolicyConflict, ChangeRequestClosed) as refused:
            messages.error(request, str(refused))
        else:
            messages.warning(request, f"Rolling back to v{version.number} {'; '.join(reasons)}: it is saved as "
                                      "pending and applies when another operator approves it.")  # fmt: skip
        return redirect("policy-detail", name=name)
    context = {
        "tool": policy.tool,
        "policy": policy,
        "version": version,
        "changes": snapshot_changes(snapshot(policy), version.snapshot),
        "four_eyes_reasons": reasons,
    }
    template = "catalog/policy_rollback.html#confirm" if request.htmx else "catalog/policy_rollback.html"
    return render(request, template, context)
