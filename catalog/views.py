"""Dashboard pages of the catalog: the tool list (with the fail-closed list first), tool detail and its examples."""

import json

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .deferral import is_deferred
from .examples import ExampleRefused, add_example, edit_example
from .forms import ToolExampleForm
from .models import Tool, ToolExample, ToolPolicy
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
