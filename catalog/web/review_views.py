"""The policy review page: the tools awaiting a policy with their proposals and evidence; operators accept, edit or
reject them in bulk with one note.

Seeing it needs catalog.view_toolpolicy (viewers get the list read-only); deciding needs catalog.change_toolpolicy
(403 otherwise). The queue, the proposals and the writes are catalog.policies.review's; a batch is saved whole or
not at all, and a form error saves nothing.
"""

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods

from catalog.models import Domain, McpServer
from catalog.policies.four_eyes import ChangeRequestClosed
from catalog.policies.review import (
    Decision,
    ReviewItem,
    ReviewOutcome,
    ReviewRefused,
    accept_proposals,
    queue_fingerprint,
    reject_tools,
    review_queue,
)
from catalog.policies.versions import PolicyConflict

from .forms import routing_warning
from .policy_views import EDIT_POLICY, VIEW_POLICY
from .review_forms import ReviewDecisionForm, ReviewRowForm

PAGE_SIZE = 100  # rows a page shows (each posts 4 fields; Django refuses a POST of over 1,000 fields)
SHOWN_NAMES = 10  # tool names a message lists before "and N more"


@dataclass
class Row:
    item: ReviewItem
    form: ReviewRowForm | None  # None for who may not edit, or a tool waiting for a second operator
    checked: bool = False

    @property
    def warning(self) -> str:
        """Why routing would never offer the tool as proposed (a write policy without a domain), or ""."""
        return routing_warning(self.item.draft())


def _row_form(request, item: ReviewItem, domains: frozenset[str]) -> ReviewRowForm:
    prefix = f"t{item.tool.pk}"
    if request.method == "POST" and f"{prefix}-operation" in request.POST:
        return ReviewRowForm(request.POST, prefix=prefix, domains=domains)
    initial = {"operation": item.proposal.operation, "risk": item.proposal.risk,
               "domains": list(item.proposal.domains), "base_version": item.base_version}  # fmt: skip
    return ReviewRowForm(prefix=prefix, domains=domains, initial=initial)


def _review_url(server: str) -> str:
    return reverse("policy-review") + (f"?{urlencode({'server': server})}" if server else "")


@login_required
@permission_required(VIEW_POLICY, raise_exception=True)
@require_http_methods(["GET", "POST"])
def policy_review(request):
    """GET: the queue (of one MCP server with ?server=). POST: accept or reject the selected tools, or all of the
    queue ("everything", checked against the queue the page showed), with the rows' edits."""
    can_edit = request.user.has_perm(EDIT_POLICY)
    if request.method == "POST" and not can_edit:
        raise PermissionDenied
    server = request.GET.get("server", "")[:64]
    items = review_queue(server=server)
    page = Paginator(items, PAGE_SIZE).get_page(request.GET.get("page"))
    domains = frozenset(Domain.objects.values_list("name", flat=True))
    decidable = [item.tool.pk for item in items if item.pending is None]
    fingerprint = queue_fingerprint(items)
    ticked = set(request.POST.getlist("tools")) if request.method == "POST" else set()
    rows = [Row(item, _row_form(request, item, domains) if can_edit and item.pending is None else None,
                checked=str(item.tool.pk) in ticked) for item in page.object_list]  # fmt: skip
    form = None
    status = 200
    if can_edit:
        data = request.POST if request.method == "POST" else None
        form = ReviewDecisionForm(data, decidable=decidable, fingerprint=fingerprint, initial={"queue": fingerprint})
    if form is not None and form.is_bound:
        response, status = _decide(request, form, items, rows, server)
        if response is not None:
            return response
    context = {
        "items": items,
        "page": page,
        "rows": rows,
        "form": form,
        "can_edit": can_edit,
        "server": server,
        "servers": list(McpServer.objects.values_list("name", flat=True)),
        "waiting": sum(item.pending is not None for item in items),
        "query": urlencode({"server": server}) if server else "",
    }
    return render(request, "catalog/policy_review.html", context, status=status)


def _decide(request, form: ReviewDecisionForm, items: list[ReviewItem], rows: list[Row],
            server: str) -> tuple[HttpResponse | None, int]:  # fmt: skip
    """Validate the batch and save it; (the redirect, 302) when saved, (None, the status to render) otherwise."""
    if not form.is_valid():
        return None, 400
    chosen_ids = set(form.cleaned_data["tools"])
    everything = form.cleaned_data["everything"]
    forms_by_tool = {row.item.tool.pk: row.form for row in rows if row.form is not None and row.form.is_bound}
    decisions, bad_rows = [], 0
    for item in items:
        if item.pending is not None or not (everything or item.tool.pk in chosen_ids):
            continue
        row_form = forms_by_tool.get(item.tool.pk)
        if row_form is None:  # a row of another page: as proposed
            decisions.append(Decision(item.tool, item.draft(), item.base_version))
        elif row_form.is_valid():
            edit = row_form.cleaned_data
            draft = item.draft(operation=edit["operation"], risk=edit["risk"], domains=edit["domains"])
            decisions.append(Decision(item.tool, draft, edit["base_version"]))
        else:
            bad_rows += 1
    if bad_rows:
        form.add_error(None, f"{bad_rows} selected row{'s' if bad_rows > 1 else ''} need{'' if bad_rows > 1 else 's'} "
                             "fixing (marked below). Nothing was saved.")  # fmt: skip
        return None, 400
    note = form.cleaned_data["note"]
    accept = form.cleaned_data["decision"] == "accept"
    try:
        if accept:
            outcome = accept_proposals(decisions, user=request.user, note=note)
        else:
            outcome = reject_tools(decisions, user=request.user, note=note)
    except (PolicyConflict, ChangeRequestClosed, ReviewRefused) as refused:
        form.add_error(None, f"{refused} Nothing was saved.")
        return None, 409
    _tell(request, outcome)
    return redirect(_review_url(server)), 302


def _names(names: list[str]) -> str:
    more = len(names) - SHOWN_NAMES
    return ", ".join(names[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")


def _tell(request, outcome: ReviewOutcome) -> None:
    if outcome.activated:
        count = len(outcome.activated)
        messages.success(request, f"Accepted {count} polic{'ies' if count > 1 else 'y'}, active now (routing may "
                                  f"offer the tools): {_names(outcome.activated)}.")  # fmt: skip
    if outcome.waiting:
        messages.warning(request, f"{len(outcome.waiting)} wait for a second operator (four eyes) and stay denied "
                                  f"until another operator approves them: {_names(outcome.waiting)}.")  # fmt: skip
    if outcome.rejected:
        count = len(outcome.rejected)
        messages.success(request, f"Rejected {count} tool{'s' if count > 1 else ''}: denied everywhere "
                                  f"(status denied): {_names(outcome.rejected)}.")  # fmt: skip
