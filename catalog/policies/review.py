"""The policy review queue: tools awaiting a policy, each with a proposal (proposals.py), and the bulk decisions.

`review_queue` reads the enabled tools with no policy or a draft one (selectors.tools_needing_policy: denied, fail
closed) and proposes a policy for each from the tools with an active policy. `accept_proposals` and `reject_tools`
write every decision of a batch in one transaction, or none: a conflict, a closed change or any error on the
thousandth tool undoes the 999 before it. Each decision goes through versions.save_policy_draft (a new immutable
PolicyVersion with the operator as author and their note) or four_eyes.request_change, like the policy editor's
saves; nothing here activates a tool without an operator's accept.

Four eyes. A single save in the editor needs a second operator when it loosens a tool at a covered risk level
(four_eyes.loosening); a tool's first policy has nothing to loosen. Accepting proposals is held to more than that,
on purpose: a proposal was written by this module, not by the operator, and one click accepts a whole batch, so
whoever accepts may not have read each row. An accepted policy at a risk four eyes covers (four_eyes.covers, by
default high and critical), or one that loosens the tool's draft policy, is therefore not applied: it becomes a
pending PolicyChangeRequest, the tool stays denied, and another operator approves it (on the policy's page or
/approvals/, four_eyes.decide_change) or rejects it. The rest of the batch is applied at once. Rejecting only keeps
a tool denied, so it never waits for anyone.
"""

import dataclasses
import hashlib
import logging
from collections.abc import Iterable, Sequence

from django.contrib.auth.models import User
from django.db import transaction

from catalog.models import McpServer, PolicyChangeRequest, Tool, ToolPolicy

from .bundle import HIGH_RISKS
from .four_eyes import covers, loosening, request_change
from .proposals import Proposal, ReviewedIndex, ReviewedTool, ToolFacts, propose_policy
from .selectors import tools_needing_policy
from .versions import Snapshot, save_policy_draft, snapshot

audit = logging.getLogger("toolhub.audit")


class ReviewRefused(Exception):
    """A tool of the batch can no longer be decided from the queue; nothing of the batch was saved."""


@dataclasses.dataclass(frozen=True)
class ReviewItem:
    """A tool awaiting review: its proposal, its draft policy (if any) and the change waiting for a second operator
    (if any: the queue lists it, but it cannot be decided again until that change is)."""

    tool: Tool
    server: str
    proposal: Proposal
    current: Snapshot | None
    base_version: int
    pending: PolicyChangeRequest | None = None

    def draft(self, *, operation: str | None = None, risk: str | None = None,
              domains: Iterable[str] | None = None) -> Snapshot:  # fmt: skip
        """The policy accepting it writes (status active), with an operator's edits; see `draft_for`."""
        return draft_for(self, operation=operation, risk=risk, domains=domains)

    @property
    def second_operator_reasons(self) -> list[str]:
        """Why accepting it as proposed waits for a second operator ([]: it applies at once)."""
        return accept_reasons(self.current, self.draft())


def draft_for(item: ReviewItem, *, operation: str | None = None, risk: str | None = None,
              domains: Iterable[str] | None = None) -> Snapshot:  # fmt: skip
    """The proposal (or the operator's edit of its operation, risk and domains) as an active policy. A draft
    policy's workflow phases and aliases are kept; confirmation stays required if the proposal required it and is
    required at high and critical risk (the bundle denies such a tool without it)."""
    proposal = item.proposal
    risk = risk or proposal.risk
    draft = proposal.snapshot(ToolPolicy.Status.ACTIVE) | {
        "operation": operation or proposal.operation,
        "risk": risk,
        "domains": sorted(set(domains if domains is not None else proposal.domains)),
        "requires_confirmation": proposal.requires_confirmation or risk in HIGH_RISKS,
    }
    if item.current is not None:
        draft |= {"workflow_phases": item.current["workflow_phases"], "aliases": item.current["aliases"]}
    return draft


def accept_reasons(current: Snapshot | None, draft: Snapshot) -> list[str]:
    """Why accepting `draft` from the queue needs a second operator (module docstring); [] when it applies now."""
    reasons = loosening(current, draft)
    if covers(draft["risk"]):
        reasons.append(f"activates a {draft['risk']}-risk policy accepted from the review queue")
    return reasons


def server_of_tools() -> dict[str, str]:
    """Catalog tool name -> the MCP server serving it now."""
    return {name: server.name for server in McpServer.objects.only("name", "tool_names") for name in server.tool_names}


def reviewed_index(servers: dict[str, str]) -> ReviewedIndex:
    """Every enabled tool with an active policy, as the proposer's evidence."""
    tools = (
        Tool.objects.filter(enabled=True, policy__status=ToolPolicy.Status.ACTIVE)
        .select_related("policy")
        .prefetch_related("policy__domains")
        .only("name", "description", "input_schema", "policy")
    )
    return ReviewedIndex(
        ReviewedTool(
            name=tool.name,
            domains=frozenset(domain.name for domain in tool.policy.domains.all()),
            description=tool.description,
            input_schema=tool.input_schema,
            server=servers.get(tool.name, ""),
        )
        for tool in tools
    )


def review_queue(*, server: str = "") -> list[ReviewItem]:
    """The tools awaiting review (of one MCP server, if named), by name, each with its proposal."""
    servers = server_of_tools()
    tools = tools_needing_policy().select_related("policy").prefetch_related("policy__domains").order_by("name")
    if server:
        tools = tools.filter(name__in=[name for name, served_by in servers.items() if served_by == server])
    tools_list = list(tools)
    if not tools_list:
        return []
    index = reviewed_index(servers)
    pending = {
        change.tool_id: change
        for change in PolicyChangeRequest.objects.filter(
            status=PolicyChangeRequest.Status.PENDING, tool__in=[tool.pk for tool in tools_list]
        ).select_related("requested_by")
    }
    items = []
    for tool in tools_list:
        policy = getattr(tool, "policy", None)
        current = snapshot(policy) if policy is not None else None
        facts = ToolFacts(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            annotations=tool.annotations,
            upstream_name=tool.upstream_name,
            server=servers.get(tool.name, ""),
            draft=current,
        )
        items.append(
            ReviewItem(
                tool=tool,
                server=facts.server,
                proposal=propose_policy(facts, index),
                current=current,
                base_version=policy.version if policy is not None else 0,
                pending=pending.get(tool.pk),
            )
        )
    return items


def queue_fingerprint(items: Iterable[ReviewItem]) -> str:
    """What "all the tools awaiting review" meant when a page was shown: a POST of "all" checks it still means that."""
    decidable = sorted(f"{item.tool.pk}:{item.base_version}" for item in items if item.pending is None)
    return hashlib.sha256(",".join(decidable).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Decision:
    """One tool of a batch: the policy to write and the version it was proposed against."""

    tool: Tool
    draft: Snapshot
    base_version: int


@dataclasses.dataclass
class ReviewOutcome:
    activated: list[str] = dataclasses.field(default_factory=list)
    waiting: list[str] = dataclasses.field(default_factory=list)  # kept as changes for a second operator
    rejected: list[str] = dataclasses.field(default_factory=list)


def _locked(decisions: Sequence[Decision]) -> list[Decision]:
    """The decisions in the order of their tools' ids, those rows locked in that order (two batches sharing tools
    wait for each other instead of deadlocking)."""
    ids = sorted({decision.tool.pk for decision in decisions})
    if len(ids) != len(decisions):
        raise ReviewRefused("A tool is in the batch twice.")
    found = set(Tool.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))
    if missing := [decision.tool.name for decision in decisions if decision.tool.pk not in found]:
        raise ReviewRefused(f"{_names(missing)} no longer exist{'s' if len(missing) == 1 else ''}.")
    waiting = PolicyChangeRequest.objects.filter(tool_id__in=ids, status=PolicyChangeRequest.Status.PENDING)
    if held := sorted(waiting.values_list("tool__name", flat=True)):
        raise ReviewRefused(f"A change of {_names(held)} already waits for a second operator: approve or reject it "
                            "first.")  # fmt: skip
    return sorted(decisions, key=lambda decision: decision.tool.pk)


@transaction.atomic
def accept_proposals(decisions: Sequence[Decision], *, user: User, note: str) -> ReviewOutcome:
    """Make each decision's draft the tool's active policy, or a change waiting for a second operator (module
    docstring); all or nothing. PolicyConflict when a tool's policy moved since it was proposed, ChangeRequestClosed
    when a change of it already waits, ReviewRefused when a tool is gone."""
    outcome = ReviewOutcome()
    decisions = _locked(decisions)
    current = _current_snapshots(decision.tool.pk for decision in decisions)
    for decision in decisions:
        draft = decision.draft | {"status": ToolPolicy.Status.ACTIVE}
        reasons = accept_reasons(current.get(decision.tool.pk), draft)
        if reasons:
            request_change(decision.tool, draft=draft, reasons=reasons, author=user, note=note,
                           base_version=decision.base_version)  # fmt: skip
            outcome.waiting.append(decision.tool.name)
        else:
            save_policy_draft(decision.tool, draft=draft, author=user, note=note, base_version=decision.base_version)
            outcome.activated.append(decision.tool.name)
    audit.info("policy review by %s: %d accepted (active), %d wait for a second operator: %s", user,
               len(outcome.activated), len(outcome.waiting), _names(outcome.activated + outcome.waiting))  # fmt: skip
    return outcome


@transaction.atomic
def reject_tools(decisions: Sequence[Decision], *, user: User, note: str) -> ReviewOutcome:
    """Deny each tool (status rejected, shown as "denied"): a tool with a draft policy keeps its values, one without
    gets the decision's draft; each is a new version with the operator and the note. All or nothing."""
    outcome = ReviewOutcome()
    decisions = _locked(decisions)
    current = _current_snapshots(decision.tool.pk for decision in decisions)
    for decision in decisions:
        draft = (current.get(decision.tool.pk) or decision.draft) | {"status": ToolPolicy.Status.REJECTED}
        save_policy_draft(decision.tool, draft=draft, author=user, note=note, base_version=decision.base_version)
        outcome.rejected.append(decision.tool.name)
    audit.info("policy review by %s: %d rejected: %s", user, len(outcome.rejected), _names(outcome.rejected))
    return outcome


def _current_snapshots(tool_ids: Iterable[int]) -> dict[int, Snapshot]:
    policies = ToolPolicy.objects.filter(tool_id__in=list(tool_ids)).prefetch_related("domains")
    return {policy.tool_id: snapshot(policy) for policy in policies}


def _names(names: list[str], shown: int = 20) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
