"""Dashboard pages of the catalog (tool examples included) and the knowledge review queue (policies: policy_views.py).

Every view needs a login (anonymous -> /login/) and a view permission; every
write needs the change permission (403 otherwise, whatever the method or
htmx header). Logic lives in selectors, forms, policies and knowledge.
"""

import csv
import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from catalog.knowledge.registry import (
    UnknownSnippets,
    current_snippets,
    mark_all_reviewed,
    mark_reviewed,
    reassign_all,
    review_from_token,
    review_token,
    revise_snippet,
    snippet_diff,
    undo_review,
)
from catalog.knowledge.selectors import owner_choices, snippet_owners, snippets_for_review
from catalog.models import KnowledgeSnippet, Tool, ToolExample
from catalog.policies.deferral import is_deferred
from catalog.policies.selectors import catalog_schema_tokens, search_tools, tools_needing_policy
from catalog.search.tool_examples import ExampleRefused, add_example, edit_example

from .forms import BulkSnippetForm, SnippetFilterForm, SnippetForm, ToolExampleForm, ToolFilterForm

VIEW_TOOL = "catalog.view_tool"
VIEW_SNIPPET = "catalog.view_knowledgesnippet"
EDIT_SNIPPET = "catalog.change_knowledgesnippet"
UNDO_SESSION_KEY = "knowledge_review_feedback"  # the feedback (with its Undo) a review without htmx redirects to
UNDO_SECONDS = 15 * 60  # how long the Undo of a review stays valid


def tool_list_context(request) -> dict:
    """The filtered tool rows of the catalog and policies pages."""
    form = ToolFilterForm(request.GET or None)
    tools = search_tools(**form.filters())
    return {
        "filter_form": form,
        "rows": [(tool, getattr(tool, "policy", None), is_deferred(tool)) for tool in tools],
        "query_string": request.GET.urlencode(),
    }


@login_required
@permission_required(VIEW_TOOL, raise_exception=True)
@require_safe
def catalog_list(request):
    context = tool_list_context(request) | {
        "needs_policy": tools_needing_policy().select_related("policy"),
        "catalog_tokens": catalog_schema_tokens(),
        "token_cap": settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS,
        "oversized": Tool.objects.filter(enabled=True, schema_tokens__gt=settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS),
    }
    template = "catalog/catalog.html#tool-table" if request.htmx else "catalog/catalog.html"
    return render(request, template, context)


@login_required
@permission_required(VIEW_TOOL, raise_exception=True)
@require_safe
def tool_detail(request, name):
    tool = get_object_or_404(Tool.objects.select_related("policy"), name=name)
    return render(request, "catalog/tool_detail.html", tool_page_context(request, tool))


def tool_page_context(request, tool, **examples) -> dict:
    policy = getattr(tool, "policy", None)
    context = {
        "tool": tool,
        "policy": policy,
        "deferred": is_deferred(tool),
        "token_cap": settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS,
        "definition": json.dumps(tool.function_definition(), indent=2, ensure_ascii=False),
    }
    return context | examples_context(request, tool, **examples)


# Knowledge


def _snippet_filters(request) -> tuple[SnippetFilterForm, dict]:
    form = SnippetFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    domain = data.get("domain")
    return form, {
        "show": data.get("show") or "stale",
        "owner": data.get("owner", ""),
        "domain": domain.name if domain else "",
    }


@login_required
@permission_required(VIEW_SNIPPET, raise_exception=True)
@require_safe
def knowledge_list(request):
    if request.htmx:
        return render(request, "catalog/knowledge.html#snippet-table", _knowledge_context(request))
    feedback = request.session.pop(UNDO_SESSION_KEY, None)  # a review without htmx came back here
    return render(request, "catalog/knowledge.html", _knowledge_context(request, feedback))


def _knowledge_context(request, feedback: dict | None = None, *, focus: str = "") -> dict:
    """The knowledge page: the filtered queue, and the feedback of the last review or undo (with its Undo form)."""
    form, filters = _snippet_filters(request)
    return {
        "filter_form": form,
        "filters": filters,
        "snippets": snippets_for_review(**filters),
        "owners": snippet_owners(),
        "owner_choices": owner_choices(),
        "can_edit": request.user.has_perm(EDIT_SNIPPET),
        "query_string": request.GET.urlencode(),
        "feedback": feedback,
        "focus_key": focus,
    }


@login_required
@permission_required(EDIT_SNIPPET, raise_exception=True)
@require_POST
def knowledge_review(request, key):
    """Stamp the current version reviewed and offer to undo it. htmx: the row as it is now (none in the stale
    queue), the count and the feedback; otherwise back to the list, which shows the feedback."""
    snippet = get_object_or_404(current_snippets(), key=key)
    review = mark_reviewed(snippet, user=request.user)
    feedback = {"message": f"“{review.title}” marked reviewed.", "key": key, "undo": review_token(review)}
    if request.htmx:
        _, filters = _snippet_filters(request)
        rows = snippets_for_review(**filters)
        context = {
            "snippet": next((row for row in rows if row.key == key), None),
            "count": len(rows),
            "can_edit": True,
            "query_string": request.GET.urlencode(),
            "feedback": feedback,
        }
        return render(request, "catalog/knowledge.html#reviewed", context)
    request.session[UNDO_SESSION_KEY] = feedback
    return redirect(f"{reverse('knowledge')}?{request.GET.urlencode()}")


@login_required
@permission_required(EDIT_SNIPPET, raise_exception=True)
@require_POST
def knowledge_bulk(request):
    """Mark the chosen snippets reviewed, or reassign them (each new owner is asked to review), all or none: a
    form error or an unknown key is a 400 with nothing changed. Answers the list as it is now with the outcome."""
    form = BulkSnippetForm(request.POST, current_keys=current_snippets().values_list("key", flat=True))
    feedback: dict
    status = 400
    if not form.is_valid():
        feedback = {"message": " ".join(error for errors in form.errors.values() for error in errors), "error": True}
    else:
        keys = form.cleaned_data["keys"]
        try:
            if form.cleaned_data["action"] == "review":
                done = len(mark_all_reviewed(keys, user=request.user))
                feedback = {"message": f"{done} snippet{'s' if done != 1 else ''} marked reviewed."}
            else:
                owner = form.cleaned_data["owner"]
                done = len(reassign_all(keys, owner=owner, author=request.user))
                feedback = {"message": f"{done} snippet{'s' if done != 1 else ''} reassigned to {owner}, who is "
                                       "asked to review them."}  # fmt: skip
            status = 200
        except (UnknownSnippets, ValueError) as error:
            feedback = {"message": f"{error} Nothing was changed.", "error": True}
    if request.htmx:
        context = _knowledge_context(request, feedback)
        return render(request, "catalog/knowledge.html#undone", context, status=status)
    if status != 200:
        return render(request, "catalog/knowledge.html", _knowledge_context(request, feedback), status=status)
    request.session[UNDO_SESSION_KEY] = feedback
    return redirect(f"{reverse('knowledge')}?{request.GET.urlencode()}")


@login_required
@permission_required(EDIT_SNIPPET, raise_exception=True)
@require_POST
def knowledge_undo_review(request, key):
    """Put back the review state a "mark reviewed" replaced (the signed `review` of its feedback). Only who
    reviewed may undo (403); a forged or expired form is 400, a snippet reviewed or edited since 409."""
    try:
        review = review_from_token(request.POST.get("review", ""), max_age=UNDO_SECONDS)
    except signing.BadSignature:
        return _undo_answer(request, f"This undo has expired or is not valid (it lasts {UNDO_SECONDS // 60} minutes).",
                            status=400)  # fmt: skip
    if review.after.reviewed_by_id != request.user.pk:
        raise PermissionDenied("Only who marked the snippet reviewed can undo it.")
    get_object_or_404(KnowledgeSnippet, pk=review.snippet_id, key=key)
    if not undo_review(review):
        message = f"“{review.title}” was reviewed or edited again since; nothing was undone."
        return _undo_answer(request, message, status=409)
    message = f"Review of “{review.title}” undone."
    if not request.htmx:
        messages.success(request, message)
        return redirect(f"{reverse('knowledge')}?{request.GET.urlencode()}")
    return _undo_answer(request, message, status=200, focus=key)


def _undo_answer(request, message: str, *, status: int, focus: str = ""):
    """htmx: the queue as it is now with the feedback beside it; otherwise the whole page (errors only)."""
    context = _knowledge_context(request, {"message": message, "error": status != 200}, focus=focus)
    template = "catalog/knowledge.html#undone" if request.htmx else "catalog/knowledge.html"
    return render(request, template, context, status=status)


@login_required
@permission_required(VIEW_SNIPPET, raise_exception=True)
@require_http_methods(["GET", "POST"])
def knowledge_detail(request, key):
    """A snippet's versions with diffs; editors get a form whose save makes a new version."""
    versions = list(KnowledgeSnippet.objects.filter(key=key).select_related("domain", "author", "reviewed_by"))
    if not versions:
        raise Http404("No snippet with this key.")
    versions.sort(key=lambda s: s.version, reverse=True)
    current = versions[0]
    can_edit = request.user.has_perm(EDIT_SNIPPET)
    form = None
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied
        form = SnippetForm(request.POST, instance=current)
        if form.is_valid():
            revision = revise_snippet(current, author=request.user, **form.changes())
            messages.success(request, f"Saved version {revision.version} of {revision.title}.")
            return redirect("knowledge-detail", key=key)
    elif can_edit:
        form = SnippetForm(instance=current)
    diffs = [(new, snippet_diff(old, new)) for new, old in zip(versions, versions[1:], strict=False)]
    context = {"current": current, "versions": versions, "diffs": diffs, "form": form, "can_edit": can_edit,
               "owner_choices": owner_choices() if can_edit else []}  # fmt: skip
    return render(request, "catalog/knowledge_detail.html", context)


class _Echo:
    """A file-like object whose write returns the line, for csv.writer over a stream."""

    def write(self, value):
        return value


CSV_HEADER = ("key", "version", "title", "text", "domain", "action", "owner", "source", "last_reviewed", "review_due",
              "days_overdue", "stale", "reviewed_by", "review_interval_days")  # fmt: skip
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection): such text gets a leading '.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """The value as a spreadsheet will not run it: text that could start a formula is prefixed with '."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _csv_rows(snippets):
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_HEADER)
    for s in snippets:
        row = (
            s.key,
            s.version,
            s.title,
            s.text,
            s.domain.name,
            s.action,
            s.owner,
            s.source,
            s.last_reviewed.isoformat(),
            s.review_due.isoformat(),
            s.days_overdue,
            "yes" if s.days_overdue > 0 else "no",
            s.reviewed_by.get_username() if s.reviewed_by else "",
            s.review_interval_days,
        )
        yield writer.writerow([csv_cell(value) for value in row])


@login_required
@permission_required(VIEW_SNIPPET, raise_exception=True)
@require_safe
def knowledge_export(request):
    """The filtered list as CSV, streamed row by row."""
    _, filters = _snippet_filters(request)
    response = StreamingHttpResponse(_csv_rows(snippets_for_review(**filters)), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="knowledge.csv"'
    return response


# --- examples of a tool (learning from traffic) -------------------------------------

EXAMPLE_PERMISSION = "catalog.change_toolexample"


def examples_context(request, tool, form=None, errors=None) -> dict:
    return {
        "tool": tool,
        "examples": tool.examples.select_related("owner").order_by("approved", "-created_at"),
        "example_form": form or ToolExampleForm(),
        "example_errors": errors or {},
        "can_edit_examples": request.user.has_perm(EXAMPLE_PERMISSION),
    }


def _examples_response(request, tool, **kwargs):
    if request.htmx:
        return render(request, "catalog/tool_detail.html#examples", examples_context(request, tool, **kwargs))
    if kwargs:  # errors without htmx: the whole page, errors next to their field
        return render(request, "catalog/tool_detail.html", tool_page_context(request, tool, **kwargs), status=400)
    return redirect("tool-detail", name=tool.name)


def _editable_tool(request, name) -> Tool:
    if not request.user.has_perm(EXAMPLE_PERMISSION):
        raise PermissionDenied("You may not change tool examples.")
    return get_object_or_404(Tool, name=name)


@login_required
@require_POST
def tool_example_add(request, name):
    """An operator adds their own example (approved unless unticked)."""
    tool = _editable_tool(request, name)
    form = ToolExampleForm(request.POST)
    if form.is_valid():
        try:
            add_example(tool=tool, text=form.cleaned_data["text"], approved=form.cleaned_data["approved"])
        except ExampleRefused as refused:
            form.add_error("text", str(refused))
    if form.errors:
        return _examples_response(request, tool, form=form)
    return _examples_response(request, tool)


@login_required
@require_POST
def tool_example_edit(request, name, pk):
    """Edit an example's text and approval; `approve`/`unapprove` buttons send only that."""
    tool = _editable_tool(request, name)
    example = get_object_or_404(ToolExample, pk=pk, tool=tool)
    data = request.POST.copy()
    if "text" not in data:
        data["text"] = example.text
    form = ToolExampleForm(data)
    errors = {}
    if form.is_valid():
        try:
            edit_example(example, text=form.cleaned_data["text"], approved=form.cleaned_data["approved"])
        except ExampleRefused as refused:
            errors[example.pk] = str(refused)
    else:
        errors[example.pk] = "; ".join(message for messages in form.errors.values() for message in messages)
    return _examples_response(request, tool, errors=errors) if errors else _examples_response(request, tool)


@login_required
@require_POST
def tool_example_delete(request, name, pk):
    tool = _editable_tool(request, name)
    get_object_or_404(ToolExample, pk=pk, tool=tool).delete()
    return _examples_response(request, tool)
