"""How /mcp decides a direct call (tools/call by name): by the tool's policy, never by a router's reading of a request.

A call names its tool, so it states its intent: no RoutingDecision (action, domains, confidence) is asked. A named
tool runs when it exists and is enabled, has an active policy, that policy does not deny it (a high or critical
risk needs requires_confirmation) and does not bind it to workflow phases (a staged flow's step runs inside a
toolhub conversation only). The caller's role and key scopes were checked before the SDK saw the request
(agents.mcp_gateway.access); a policy that requires confirmation sends the call through the approval path
(agents.mcp_gateway.call_approvals). Whether the tool is listed (deferred, found through tool_search or not) plays
no part: listing is about context, not permission. Every refusal names the rule that refused. Never runs a tool.
"""

from __future__ import annotations

import dataclasses

from catalog.models import ToolPolicy
from catalog.policies.bundle import HIGH_RISKS, CapabilityBundle, loaded_tool
from catalog.policies.decision import CatalogEntry


class ToolRefused(Exception):
    """The tool was not run for a reason that is not its arguments' or its own; the message names the rule."""


def refusal(name: str, entry: CatalogEntry | None) -> str | None:
    """Why a direct call of `name` may not run (`entry`: its catalog entry, None when there is no such tool)."""
    if entry is None:
        return f"There is no tool named {name}."
    if not entry.enabled:
        return f"{name} is disabled in the catalog; it was not run."
    policy = entry.policy
    if policy is None:
        return f"{name} has no active policy: it has no policy (fail closed); it was not run."
    if policy.status == ToolPolicy.Status.REJECTED:
        return f"{name}'s policy denies it: its policy was rejected; it was not run."
    if policy.status != ToolPolicy.Status.ACTIVE:
        return f"{name} has no active policy: its policy is {policy.status}; it was not run."
    if policy.risk in HIGH_RISKS and not policy.requires_confirmation:
        return f"{name}'s policy denies it: risk {policy.risk} without requires_confirmation; it was not run."
    if policy.workflow_phases:
        phases = ", ".join(policy.workflow_phases)
        return (f"{name}'s policy allows it only in workflow phases {phases} of a toolhub conversation, not in a "
                "direct call; it was not run.")  # fmt: skip
    return None


def requires_approval(entry: CatalogEntry) -> bool:
    """Whether a permitted tool's calls wait for a person's approval (its policy says so)."""
    return entry.policy is not None and entry.policy.requires_confirmation


def bundle_holding(bundle: CapabilityBundle, entry: CatalogEntry) -> CapabilityBundle:
    """`bundle` with the permitted tool loaded, so the runtime's checks and execution run it as in a turn."""
    if bundle.holds(entry.name):
        return bundle
    return dataclasses.replace(bundle, loaded=(*bundle.loaded, loaded_tool(entry)))
