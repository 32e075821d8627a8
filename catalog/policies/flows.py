"""Staged flows as configured: each an ordered list of workflow phases and the tools whose confident `create`
starts it (settings.TOOLHUB_WORKFLOW_FLOWS). Plain data read by the router (which first step to recommend) and
by the turn runtime (agents.turns.staged_flows drives a flow's workflow). Never touches a workflow.
"""

from dataclasses import dataclass

from django.conf import settings

from catalog.models import Action

from .decision import RoutingDecision


@dataclass(frozen=True)
class Flow:
    kind: str
    phases: tuple[str, ...]
    starts_for: frozenset[str]

    def after(self, phase: str) -> str | None:
        index = self.phases.index(phase)
        return self.phases[index + 1] if index + 1 < len(self.phases) else None


def configured_flows() -> tuple[Flow, ...]:
    return tuple(
        Flow(kind, tuple(flow["phases"]), frozenset(flow.get("starts_for", ())))
        for kind, flow in settings.TOOLHUB_WORKFLOW_FLOWS.items()
    )


def flow_of_kind(kind: str) -> Flow | None:
    return next((flow for flow in configured_flows() if flow.kind == kind), None)


def flow_to_start(decision: RoutingDecision, recommended: tuple[str, ...]) -> Flow | None:
    """The flow this request starts: a confident create for which a flow's starting tool is recommended."""
    if decision.phase or decision.action != Action.CREATE or decision.confidence < settings.TOOLHUB_MIN_CONFIDENCE:
        return None
    return next((flow for flow in configured_flows() if flow.starts_for & set(recommended)), None)
