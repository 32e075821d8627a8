"""Staged flows: the workflows a conversation's tool calls drive (start, choose a type, advance, submit).

A flow is an ordered list of workflow phases (settings.TOOLHUB_WORKFLOW_FLOWS, read by
catalog.policies.flows).
The step tool of a phase is a tool whose policy names that phase alone; tools
whose policy names several phases (e.g. "show the draft") help at any step
and move nothing.

- Start: a confident `create` request for which the steward recommends one of
  the flow's `starts_for` tools starts the flow at its first phase, so the
  bundle holds the first step's tools instead of the one-shot giant tool.
- Type first: a staged tool (catalog.policies.staged) whose choice property arrives
  holding only its `type` records the choice in the workflow's state and is
  not sent to the tool; the next step shows that type's fields only.
- Advance: a step tool that succeeds moves the workflow to the next phase,
  compare-and-set on the version it was read at (a lost race raises
  WorkflowConflict; nothing is overwritten). Ids the tool returned
  (top-level `*_id` strings) are kept in the state.
- Submit: the last step's tool call runs inside agents.turns.workflows.submit_workflow
  under the key `<kind>-<workflow id>`, so a retried or redelivered submit
  answers with the first result and never runs the tool twice.

Never decides what policy allows (catalog.policies.bundle does) and writes workflows
only through agents.turns.workflows.
"""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from agents.models import Conversation, Workflow
from catalog.models import Action
from catalog.policies.decision import CatalogEntry
from catalog.policies.flows import Flow, flow_of_kind
from catalog.policies.staged import staged_choices

from .tool_calls import CallOutcome
from .workflows import advance_workflow, start_workflow, submit_workflow


@dataclass(frozen=True)
class Step:
    """A call of the current phase's step tool."""

    flow: Flow
    phase: str

    @property
    def submits(self) -> bool:
        return self.flow.after(self.phase) is None


class StepFailed(Exception):
    """The submitting call failed: roll the submit back and hand the failure to the model."""

    def __init__(self, outcome: CallOutcome):
        super().__init__(outcome.content)
        self.outcome = outcome


def active_workflow(conversation: Conversation) -> Workflow | None:
    """The conversation's live workflow (the most recently changed one), if any."""
    return (
        Workflow.objects.filter(conversation=conversation, status=Workflow.Status.ACTIVE, expires_at__gt=timezone.now())
        .order_by("-updated_at")
        .first()
    )


def start_flow(conversation: Conversation, flow: Flow) -> Workflow:
    return start_workflow(
        conversation=conversation,
        owner=conversation.owner,
        kind=flow.kind,
        phase=flow.phases[0],
        state={"action": Action.CREATE, "choices": {}, "ids": {}},
    )


def step_of(entry: CatalogEntry | None, workflow: Workflow | None) -> Step | None:
    """The step this tool performs in the workflow: it is the step tool of the workflow's current phase."""
    if entry is None or entry.policy is None or workflow is None or workflow.status != Workflow.Status.ACTIVE:
        return None
    flow = flow_of_kind(workflow.kind)
    if flow is None or entry.policy.workflow_phases != (workflow.phase,) or workflow.phase not in flow.phases:
        return None
    return Step(flow, workflow.phase)


def type_choices(entry: CatalogEntry, arguments: Mapping[str, object], workflow: Workflow) -> dict[str, str]:
    """The staged choices these arguments make: a choice property not chosen yet that holds only its type."""
    chosen = workflow.state.get("choices", {})
    made: dict[str, str] = {}
    for name, types in staged_choices(entry.input_schema).items():
        value = arguments.get(name)
        if name not in chosen and isinstance(value, dict) and set(value) == {"type"} and value["type"] in types:
            made[name] = value["type"]
    return made


def record_choices(workflow: Workflow, choices: dict[str, str]) -> Workflow:
    return advance_workflow(
        workflow_id=workflow.pk,
        expected_version=workflow.version,
        state_changes={"choices": workflow.state.get("choices", {}) | choices},
    )


def returned_ids(content: str) -> dict[str, str]:
    """Top-level `*_id` strings of a JSON tool result (e.g. the draft_id a later step needs)."""
    try:
        result = json.loads(content)
    except ValueError:
        return {}
    if not isinstance(result, dict):
        return {}
    return {key: value for key, value in result.items() if key.endswith("_id") and isinstance(value, str)}


def advance_after(step: Step, workflow: Workflow, content: str) -> Workflow:
    """Move to the next phase after the step's tool succeeded."""
    return advance_workflow(
        workflow_id=workflow.pk,
        expected_version=workflow.version,
        phase=step.flow.after(step.phase),
        state_changes={"ids": workflow.state.get("ids", {}) | returned_ids(content)},
    )


def submit(step: Step, workflow: Workflow, run_call: Callable[[], CallOutcome]) -> dict[str, Any]:
    """Run the last step's call once per workflow; its outcome is the workflow's stored result.

    `run_call()` returns the call's outcome; a failed outcome raises StepFailed,
    which rolls the submit back (the workflow stays active at this phase).
    """

    def create_record(_workflow: Workflow) -> dict[str, Any]:
        outcome = run_call()
        if outcome.is_error:
            raise StepFailed(outcome)
        return {"tool": step.phase, "content": outcome.content}

    return submit_workflow(
        workflow_id=workflow.pk,
        owner=workflow.owner,
        idempotency_key=f"{workflow.kind}-{workflow.pk}",
        expected_version=workflow.version,
        create_record=create_record,
    )
