"""What each API key has found through tool_search over /mcp, kept TOOLHUB_MCP_FOUND_TTL seconds across sessions.

A client that opens a new MCP session per call (the Inspector's CLI, most
stateless clients) can call what it found a call ago. Each row keeps the
routing decision of the search that found the tool: a write tool found for a
confident "create" request stays callable under that decision, never under
a neutral one. Policy is checked again on every use; a row never grants what
policy denies. Finding a tool again renews it.
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.utils import timezone

from agents.models import McpFoundTool
from catalog.models import Tool
from catalog.policies.decision import RoutingDecision


def found_tools(api_key_id: int) -> dict[str, RoutingDecision]:
    """Tool name -> the decision it was found under, for the tools this key found that have not expired."""
    rows = McpFoundTool.objects.filter(api_key_id=api_key_id, expires_at__gt=timezone.now()).values_list(
        "tool__name", "decision"
    )
    return {name: RoutingDecision.from_dict(decision) for name, decision in rows}


def remember_found(api_key_id: int, names: list[str] | tuple[str, ...], decision: RoutingDecision) -> None:
    """Keep (or renew) what a search by this key found; its expired rows go at the same time."""
    now = timezone.now()
    McpFoundTool.objects.filter(api_key_id=api_key_id, expires_at__lte=now).delete()
    if not names:
        return
    expires_at = now + datetime.timedelta(seconds=settings.TOOLHUB_MCP_FOUND_TTL)
    exact = decision.as_dict() | {"confidence": decision.confidence}  # as_dict rounds; policy compares exactly
    rows = [
        McpFoundTool(api_key_id=api_key_id, tool_id=tool_id, decision=exact, expires_at=expires_at)
        for tool_id in Tool.objects.filter(name__in=names).values_list("pk", flat=True)
    ]
    McpFoundTool.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["api_key", "tool"], update_fields=["decision", "expires_at"]
    )
