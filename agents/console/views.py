"""Dashboard pages about conversations: overview, live console, approvals inbox, turn search, a tool's activity,
routing log, workflows, and an operator's actions on a turn (decide an approval, answer an MCP server's question,
cancel it).

Thin: check the permission, parse the form, call a logic module (fragments, overview, turn_search, tool_activity,
approval_inbox here; agents.turns.start, .approvals, .cancellation, .workflows), render a page or, for htmx, its
partial. The policy simulation, which replays this app's routing logs, is a page of the policy it simulates
(catalog.web.views).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.access.abilities import ANSWER_QUESTION, START_TURN, allows, refusal
from agents.models import Conversation, RoutingLog, ServerQuestion, ToolApproval, Turn, Workflow
from agents.turns import cancellation, questions
from agents.turns.approvals import PERMISSION as DECIDE_PERMISSION
from agents.turns.approvals import ApprovalClosed, FourEyes, approval_to_decide, decide_approval, started_the_turn
from agents.turns.retention import retention_status
from agents.turns.start import start_console_turn
from agents.turns.workflows import WorkflowError, cancel_workflow, http_status_for
from catalog.knowledge.selectors import stale_snippets
from catalog.models import Tool
from catalog.policies.four_eyes import pending_changes
from catalog.policies.selectors import catalog_schema_tokens, tools_needing_policy

from . import approval_inbox, breakdown, fragments
from . import overview as live_overview
from .examples import EXAMPLE_REQUESTS
from .forms import (
    CancelWorkflowForm,
    ChatForm,
    DecisionForm,
    RoutingFilterForm,
    ToolActivityForm,
    TurnSearchForm,
    WorkflowFilterForm,
)
from .metrics import (
    DEFAULT_QUALITY_WINDOW,
    QUALITY_WINDOWS,
    MetricsWindow,
    quality_window,
    routing_metrics,
)
from .question_form import QuestionForm
from .tool_activity import tool_activity
from .turn_search import search_page

# What the overview shows (request texts, counts, latencies) is what turns tell: the permission to see turns.
OVERVIEW_PERMISSION = "agents.view_turn"
ROUTING_PAGE_SIZE = 200
WORKFLOW_PAGE_SIZE = 200


def _back(request, default: str) -> str:
    back = request.POST.get("next", "")
    return back if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}) else default


@login_required
def overview(request):
    """The overview, for whoever may see turns (as its live socket, /ws/overview/). Everyone else lands here after
    logging in too: a page that says their account has no role for it, and shows nothing of the traffic."""
    if not request.user.has_perm(OVERVIEW_PERMISSION):
        return render(request, "agents/no_role.html", {"permission": OVERVIEW_PERMISSION}, status=403)
    context = {
        "tool_count": Tool.objects.filter(enabled=True).count(),
        "needs_policy_count": tools_needing_policy().count(),
        "catalog_tokens": catalog_schema_tokens(),
        "retention": retention_status(),
        "stale_snippet_count": len(stale_snippets()),
        "pending_policy_changes": pending_changes().count(),
        **live_overview.live_context(),
        **_range_context(request),
    }
    return render(request, "agents/overview.html", context, status=400 if context["range_error"] else 200)


def _range_context(request) -> dict:
    """The overview's breakdown over the range the address asks for (agents/console/breakdown.py)."""
    span, error = breakdown.time_range(request.GET)
    return {"span": span, "range_error": error, "breakdown": breakdown.breakdown(span), "ranges": breakdown.RANGES,
            "custom": {"from": request.GET.get("from", "")[:32], "to": request.GET.get("to", "")[:32]}}  # fmt: skip


@login_required
@permission_required("agents.view_turn", raise_exception=True)
@require_http_methods(["GET", "POST"])
def console_list(request):
    """GET: recent conversations (live over /ws/console/). POST: an operator starts a new conversation."""
    form = None
    if allows(request.user, START_TURN):
        # ?message=… (an example request's link) pre-fills the box, unbound: nothing is validated or sent.
        prefill = request.GET.get("message", "")[: ChatForm.base_fields["message"].max_length]
        form = ChatForm(request.POST or None, initial={"message": prefill} if prefill else None)
        if prefill and request.method == "GET":
            form.fields["message"].widget.attrs["autofocus"] = True
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("You may not start a conversation.")
        if form.is_valid():
            turn = start_console_turn(
                user=request.user, text=form.cleaned_data["message"], model_profile=form.model_profile()
            )
            return redirect("console-conversation", conversation_id=turn.conversation_id)
    rows = fragments.conversation_rows()
    # A first run: an operator with no conversation yet gets requests that work on the demo catalog.
    examples = EXAMPLE_REQUESTS if form is not None and not rows else ()
    context = {"rows": rows, "form": form, "examples": examples}
    return render(request, "agents/console.html", context, status=400 if form is not None and form.errors else 200)


@login_required
@permission_required("agents.view_turn", raise_exception=True)
@require_http_methods(["GET", "POST"])
def console_conversation(request, conversation_id: int):
    """GET: the thread (history now, live over /ws/console/<id>/). POST: its owner adds a turn."""
    conversation = get_object_or_404(Conversation.objects.select_related("owner"), pk=conversation_id)
    may_start = allows(request.user, START_TURN)
    may_chat = may_start and conversation.owner_id == request.user.pk
    form = ChatForm(request.POST or None) if may_chat else None
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("You may not add to this conversation.")
        if form.is_valid():
            turn = start_console_turn(user=request.user, text=form.cleaned_data["message"], conversation=conversation)
            if request.htmx:
                context = {"form": ChatForm(), "conversation": conversation, "running": True, "sent_turn": turn.id}
                return render(request, "agents/conversation.html#chat", context)
            return redirect("console-conversation", conversation_id=conversation.pk)
        if request.htmx:
            context = {"form": form, "conversation": conversation, "running": fragments.has_running_turn(conversation)}
            return render(request, "agents/conversation.html#chat", context, status=400)
    context = {
        "conversation": conversation,
        "turns": fragments.thread(conversation),
        "can_decide": request.user.has_perm(DECIDE_PERMISSION),
        "own_conversation": conversation.owner_id == request.user.pk,  # four eyes: they may only deny risky calls
        "form": form,
        "may_start": may_start,
        "running": fragments.has_running_turn(conversation),
        "ended": fragments.ENDED,
    }
    return render(request, "agents/conversation.html", context)


@require_GET
@login_required
@permission_required("agents.view_turn", raise_exception=True)
def turn_search(request):
    """Turns matching the filters of the query string, a page at a time; a bad filter is a 400 showing the form's
    error (and no results)."""
    form = TurnSearchForm(request.GET)
    context = {"form": form, "page": None, "rows": []}
    if form.is_valid():
        page, rows = search_page(form.filters(), request.GET.get("page"))
        params = request.GET.copy()
        params.pop("page", None)
        context |= {"page": page, "rows": rows, "query": params.urlencode()}
    return render(request, "agents/search.html", context, status=200 if form.is_valid() else 400)


@require_GET
@login_required
@permission_required("agents.view_turn", raise_exception=True)
def tool_activity_view(request, name: str):
    """A catalog tool's calls, errors and latency over a period, and its recent calls with links to their turns."""
    tool = get_object_or_404(Tool.objects.only("name", "description"), name=name)
    params = request.GET.copy()
    params.setdefault("window", DEFAULT_QUALITY_WINDOW.key)  # the select shows the period the figures cover
    form = ToolActivityForm(params)
    context = {"tool": tool, "form": form}
    if not form.is_valid():
        return render(request, "agents/tool_activity.html", context, status=400)
    window = form.period()
    until = timezone.now()
    context |= {"window": window, "since": until - window.span, "until": until,
                "activity": tool_activity(tool.name, since=until - window.span, until=until)}  # fmt: skip
    return render(request, "agents/tool_activity.html", context)


@require_POST
@login_required
def cancel_turn(request, turn_id: int):
    """An operator cancels an unfinished turn (agents.turns.cancellation); 409 when it had already ended. The console
    shows the end from the turn's events; htmx gets an empty answer, a plain form the conversation again."""
    if not request.user.has_perm(cancellation.PERMISSION):
        raise PermissionDenied("You may not cancel turns.")
    turn = get_object_or_404(Turn, pk=turn_id)
    if not cancellation.cancel_turn(turn_id=turn.pk, user=request.user):
        turn.refresh_from_db(fields=["status"])  # it may have ended since it was read
        return HttpResponse(f"Turn {turn.pk} had already ended ({turn.status}).", status=409)
    if request.htmx:
        return HttpResponse(status=204)
    messages.success(request, f"Turn {turn.pk} cancelled.")
    return redirect("console-conversation", conversation_id=turn.conversation_id)


@require_POST
@login_required
def decide(request, approval_id: int):
    """Approve or deny (with an optional reason) a pending risky call. The permission is checked before the id is
    looked up (approval_to_decide: 403 for any id to whoever may not decide it, so ids cannot be probed).

    htmx gets the approval's fragment back (409 with the reason when it was already closed, 400 for a bad form).
    """
    try:
        pending = approval_to_decide(approval_id=approval_id, user=request.user)
    except ToolApproval.DoesNotExist:
        raise Http404(f"No approval {approval_id}.") from None
    # Without JS the form posts and comes back: to `next`, else the conversation (fragments sent over the
    # WebSocket are rendered without a request, so their form has no `next`).
    back = _back(request, reverse("console-conversation", args=[pending.turn.conversation_id]))
    form = DecisionForm(request.POST)
    if not form.is_valid():
        if request.htmx:
            context = {"approval": fragments.approval_card(pending, note=form.first_error()), "can_decide": True,
                       "own_conversation": started_the_turn(request.user, pending)}  # fmt: skip
            return render(request, "agents/conversation.html#approval", context, status=400)
        messages.error(request, form.first_error())
        return redirect(back)
    approve = form.cleaned_data["decision"] == "approve"
    try:
        approval = decide_approval(approval_id=approval_id, user=request.user, approve=approve,
                                   reason=form.cleaned_data["reason"])  # fmt: skip
    except FourEyes as refused:
        if not request.htmx:
            raise  # the 403 page says why
        context = {"approval": fragments.approval_card(pending, note=str(refused)), "can_decide": True,
                   "own_conversation": True}  # fmt: skip
        return render(request, "agents/conversation.html#approval", context, status=403)
    except ApprovalClosed as closed:
        if request.htmx:
            pending.refresh_from_db()
            context = {"approval": fragments.approval_card(pending, note=str(closed))}
            return render(request, "agents/conversation.html#approval", context, status=409)
        messages.error(request, str(closed))
    else:
        if request.htmx:
            return render(request, "agents/conversation.html#approval", {"approval": fragments.approval_card(approval)})
        messages.success(request, f"{approval.tool_name}: {approval.status}.")
    return redirect(back)


@login_required
@require_http_methods(["GET", "POST"])
def question(request, question_id: int):
    """GET: an MCP server's question during a turn's tool call, alone on a page, with its form for those who may
    answer. POST: an operator answers it (decision=answer, the form's fields) or declines it (decision=decline).

    The permission is checked before the id is looked up. An answer that breaks the server's schema comes back with
    the errors next to their fields (400: the card for htmx, this page otherwise); a question already closed is a
    409 for htmx, a message otherwise.
    """
    if request.method == "POST":
        refused = refusal(request.user, ANSWER_QUESTION)
        if refused is not None:
            raise PermissionDenied(refused.message)
    elif not request.user.has_perm(OVERVIEW_PERMISSION):
        raise PermissionDenied("You may not see turns.")
    asked = get_object_or_404(ServerQuestion.objects.select_related("turn", "answered_by"), pk=question_id)
    if request.method == "GET":
        return _question_page(request, asked)
    back = _back(request, reverse("console-conversation", args=[asked.turn.conversation_id]) + f"#turn-{asked.turn_id}")
    decision = request.POST.get("decision")
    try:
        if decision == "decline":
            asked = questions.decline_question(question_id=asked.pk, user=request.user)
        elif decision == "answer":
            form = QuestionForm(asked.requested_schema, request.POST, auto_id=f"question-{asked.pk}-%s")
            if not form.is_valid():
                return _question_page(request, asked, form=form, status=400)
            asked = questions.answer_question(question_id=asked.pk, user=request.user, content=form.content())
        else:
            return _question_page(request, asked, note="Choose Submit or Decline.", status=400)
    except questions.QuestionClosed as closed:
        asked.refresh_from_db()
        if request.htmx:
            return _question_page(request, asked, note=str(closed), status=409)
        messages.error(request, str(closed))
        return redirect(back)
    if request.htmx:
        return _question_page(request, ServerQuestion.objects.select_related("answered_by").get(pk=asked.pk))
    messages.success(request, f"The server's question: {questions.closed_word(asked.status)}.")
    return redirect(back)


def _question_page(request, asked: ServerQuestion, *, form: QuestionForm | None = None, note: str = "",
                   status: int = 200) -> HttpResponse:  # fmt: skip
    """The question's card: alone for htmx, on its page otherwise."""
    context = {"question": fragments.question_card_of(asked, form=form, note=note), "turn": asked.turn,
               "can_decide": allows(request.user, ANSWER_QUESTION)}  # fmt: skip
    template = "agents/conversation.html#question" if request.htmx else "agents/question.html"
    return render(request, template, context, status=status)


@require_GET
@login_required
@permission_required(approval_inbox.VIEW_TURNS, raise_exception=True)
def approvals_inbox(request):
    """Every tool call waiting for an approval (with its deadline, who started its turn and where), every MCP
    server's question waiting for an operator's answer, and every policy change waiting for a second operator, each
    with the controls its own page has."""
    context = {
        "calls": approval_inbox.tool_call_rows(request.user),
        "questions": approval_inbox.question_rows(),
        "can_decide": request.user.has_perm(DECIDE_PERMISSION),
        "show_policy_changes": request.user.has_perm(approval_inbox.VIEW_POLICIES),
        "policy_changes": approval_inbox.policy_change_rows(request.user),
        "can_edit_policies": request.user.has_perm(approval_inbox.EDIT_POLICIES),
    }
    template = "agents/approvals.html#inbox" if request.htmx else "agents/approvals.html"
    return render(request, template, context)


@require_GET
@login_required
@permission_required("agents.view_routinglog", raise_exception=True)
def routing_list(request):
    """The routing log (filtered) under the recommendation quality of a window; htmx gets whichever part it targets."""
    window = quality_window(request.GET.get("window"))
    if request.htmx and request.htmx.target == "quality":
        return render(request, "agents/routing.html#quality", _quality_context(request, window) | {"oob": True})
    form = RoutingFilterForm(request.GET)
    logs = form.filter(RoutingLog.objects.defer("knowledge", "deferred"))
    context = {"form": form, "logs": logs[:ROUTING_PAGE_SIZE], "page_size": ROUTING_PAGE_SIZE,
               "query": request.GET.urlencode(), "window": window}  # fmt: skip
    if request.htmx:
        return render(request, "agents/routing.html#log-table", context)
    return render(request, "agents/routing.html", context | _quality_context(request, window))


def _quality_context(request, window: MetricsWindow) -> dict:
    """The recommendation-quality section: its figures and one link per window that keeps the other parameters."""
    now = timezone.now()
    metrics = routing_metrics(since=now - window.span, until=now)
    links = []
    for choice in QUALITY_WINDOWS:
        params = request.GET.copy()
        params["window"] = choice.key
        links.append({"window": choice, "query": params.urlencode(), "current": choice == window})
    rows = [("All", metrics), ("Two-stage", metrics["stages"]["two_stage"]),
            ("Single-stage", metrics["stages"]["single_stage"])]  # fmt: skip
    return {"window": window, "window_links": links, "quality": metrics, "quality_rows": rows}


@require_GET
@login_required
@permission_required("agents.view_routinglog", raise_exception=True)
def routing_detail(request, log_id: int):
    log = get_object_or_404(RoutingLog.objects.select_related("turn"), pk=log_id)
    back = request.GET.get("back", "")
    return render(request, "agents/routing_detail.html", {"log": log, "back": back})


@require_GET
@login_required
@permission_required("agents.view_workflow", raise_exception=True)
def workflow_list(request):
    form = WorkflowFilterForm(request.GET)
    workflows = form.filter(Workflow.objects.select_related("owner").defer("state", "result"))
    context = {
        "form": form,
        "workflows": workflows[:WORKFLOW_PAGE_SIZE],
        "page_size": WORKFLOW_PAGE_SIZE,
        "can_cancel": request.user.has_perm("agents.change_workflow"),
        "query": request.GET.urlencode(),
        "now": timezone.now(),
    }
    template = "agents/workflows.html#workflow-table" if request.htmx else "agents/workflows.html"
    return render(request, template, context)


@require_POST
@login_required
@permission_required("agents.change_workflow", raise_exception=True)
def workflow_cancel(request, workflow_id: int):
    """Cancel at the version the page showed; a stale version (or a closed workflow) is a message, 409 for htmx."""
    workflow = get_object_or_404(Workflow.objects.select_related("owner"), pk=workflow_id)
    form = CancelWorkflowForm(request.POST)
    error = None
    if not form.is_valid():
        error, status = "The form was incomplete: reload the page.", 400
    else:
        try:
            workflow = cancel_workflow(workflow_id=workflow_id, expected_version=form.cleaned_data["version"])
        except WorkflowError as refused:
            error, status = str(refused), http_status_for(refused)
            workflow.refresh_from_db()
    if request.htmx:
        context = {"workflow": workflow, "can_cancel": True, "error": error, "now": timezone.now()}
        return render(request, "agents/workflows.html#workflow-row", context, status=status if error else 200)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Workflow {workflow.pk} cancelled.")
    return redirect(_back(request, "workflows"))
