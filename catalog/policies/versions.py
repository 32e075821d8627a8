"""Writes to tool policies: every change becomes an immutable PolicyVersion; simulate a draft before saving.

The active policy is ToolPolicy's row; `ToolPolicy.version` points at the
PolicyVersion it equals. Rollback copies an old snapshot back and moves the
pointer. A draft is a snapshot-shaped dict (SNAPSHOT_FIELDS + domains) that
is not saved yet. Never edit a PolicyVersion; never read agents' models here
(simulation takes plain RoutingDecisions and the names of the tools each request called).
"""

import dataclasses
import datetime
import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max

from catalog.models import Domain, PolicyRollback, PolicyVersion, Tool, ToolPolicy

from .bundle import CapabilityBundle, build_bundle
from .decision import CatalogEntry, PolicyView, RoutingDecision

audit = logging.getLogger("toolhub.audit")

SNAPSHOT_FIELDS = ("operation", "risk", "workflow_phases", "aliases", "requires_confirmation", "status")
# A policy as data (PolicyVersion.snapshot, a draft): SNAPSHOT_FIELDS and "domains" (sorted names), JSON values.
Snapshot = dict[str, Any]
DIFF_FIELDS = ("status", "domains", "operation", "risk", "workflow_phases", "aliases", "requires_confirmation")


class PolicyConflict(Exception):
    """The policy moved to another version since the editor opened it."""


def snapshot(policy: ToolPolicy) -> Snapshot:
    data: Snapshot = {field: getattr(policy, field) for field in SNAPSHOT_FIELDS}
    data["domains"] = sorted(domain.name for domain in policy.domains.all())
    return data


@transaction.atomic
def record_policy_version(policy: ToolPolicy, *, author: User | None = None, note: str = "") -> PolicyVersion:
    """Snapshot the policy as saved now and make that snapshot the active version."""
    # Lock the policy row so two editors never get the same version number.
    ToolPolicy.objects.select_for_update().filter(pk=policy.pk).first()
    latest = policy.versions.aggregate(latest=Max("number"))["latest"] or 0
    version = PolicyVersion.objects.create(
        policy=policy, number=latest + 1, snapshot=snapshot(policy), author=author, note=note
    )
    ToolPolicy.objects.filter(pk=policy.pk).update(version=version.number)
    policy.version = version.number
    return version


@transaction.atomic
def save_policy_draft(
    tool: Tool, *, draft: Snapshot, author: User | None, note: str, base_version: int
) -> PolicyVersion:
    """Apply `draft` to the tool's policy (creating it if the tool has none) and record a new version.

    `base_version` is the version the editor started from; if the active version moved
    since, raise PolicyConflict instead of overwriting someone else's change.
    """
    # Lock the tool row: before a tool's first policy there is no policy row to lock, and two first saves
    # would both insert one (a unique violation) instead of the second getting a conflict.
    Tool.objects.select_for_update().filter(pk=tool.pk).first()
    policy = ToolPolicy.objects.select_for_update().filter(tool=tool).first()
    if (policy.version if policy else 0) != base_version:
        raise PolicyConflict(
            f"The policy of {tool.name} changed to version {policy.version if policy else 0} "
            f"since you opened it (version {base_version}); reload and edit again."
        )
    if policy is None:
        policy = ToolPolicy(tool=tool)
    for field in SNAPSHOT_FIELDS:
        setattr(policy, field, draft[field])
    policy.full_clean(exclude=["tool", "domains"])
    policy.save()
    policy.domains.set(Domain.objects.filter(name__in=draft["domains"]))
    return record_policy_version(policy, author=author, note=note)


@transaction.atomic
def rollback_policy(policy: ToolPolicy, *, number: int, user: User | None = None) -> ToolPolicy:
    """Make version `number` active again: copy its snapshot back, move the pointer, and record who did it and when
    (a PolicyRollback)."""
    policy = ToolPolicy.objects.select_for_update().get(pk=policy.pk)
    version = policy.versions.get(number=number)
    data = dict(version.snapshot)
    domain_names = data.pop("domains")
    for field, value in data.items():
        setattr(policy, field, value)
    previous, policy.version = policy.version, version.number
    policy.save()
    policy.domains.set(Domain.objects.filter(name__in=domain_names))
    PolicyRollback.objects.create(policy=policy, from_version=previous, to_version=number, actor=user)
    if user is not None:
        audit.info("policy of %s rolled back from v%s to v%s by %s", policy.tool.name, previous, number, user)
    return policy


def snapshot_changes(old: Snapshot | None, new: Snapshot) -> list[tuple[str, object, object]]:
    """(field, before, after) for every field that differs; everything when there is no `old`."""
    old = old or {}
    return [(field, old.get(field), new.get(field)) for field in DIFF_FIELDS if old.get(field) != new.get(field)]


def version_history(policy: ToolPolicy) -> list[tuple[PolicyVersion, list[tuple[str, object, object]]]]:
    """Every version, newest first, with its changes against the version before it."""
    versions = list(policy.versions.select_related("author").order_by("number"))
    history: list[tuple[PolicyVersion, list[tuple[str, object, object]]]]
    previous: Snapshot | None
    history, previous = [], None
    for version in versions:
        history.append((version, snapshot_changes(previous, version.snapshot)))
        previous = version.snapshot
    return history[::-1]


def draft_view(draft: Snapshot) -> PolicyView:
    """The bundle rules' view of a draft policy."""
    return PolicyView(
        status=draft["status"],
        operation=draft["operation"],
        risk=draft["risk"],
        domains=frozenset(draft["domains"]),
        workflow_phases=tuple(draft["workflow_phases"]),
        aliases=tuple(draft["aliases"]),
        requires_confirmation=draft["requires_confirmation"],
    )


@dataclasses.dataclass(frozen=True)
class Replay:
    """One logged request to replay: its decision, the tools the steward recommended and the tools the model
    called (each called tool once); what was asked and when, as the simulation page shows them."""

    decision: RoutingDecision
    recommended: tuple[str, ...] = ()
    called: tuple[str, ...] = ()
    query: str = ""
    logged_at: datetime.datetime | None = None


# Where simulations read the requests they replay: the app that logs requests registers a function
# (count -> the last `count` Replays, newest first) when it is ready (agents registers its routing logs), so the
# policy engine reads past traffic without importing the app that records it.
_replay_sources: list[Callable[[int], list[Replay]]] = []


def register_replay_source(source: Callable[[int], list[Replay]]) -> None:
    if source not in _replay_sources:
        _replay_sources.append(source)


def recent_replays(count: int) -> list[Replay]:
    """The last `count` logged requests to replay, newest first; none when no app logs requests."""
    found = [replay for source in _replay_sources for replay in source(count)]
    newest = datetime.datetime.max.replace(tzinfo=datetime.UTC)
    return sorted(found, key=lambda replay: replay.logged_at or newest, reverse=True)[:count]


class CallStatus(enum.StrEnum):
    """What becomes of a call of a tool under a bundle (agents.turns.runtime does the same with the bundle it built)."""

    RUNS = "runs"
    NEEDS_APPROVAL = "needs approval"  # loaded or found through tool_search, and its policy requires confirmation
    DENIED = "denied"  # neither loaded nor deferred: the call is refused


@dataclasses.dataclass(frozen=True)
class CallChange:
    """A tool the request called whose call would fare differently under the draft."""

    name: str
    before: CallStatus
    after: CallStatus


@dataclasses.dataclass(frozen=True)
class SimulatedRequest:
    """How one request changes under the draft (current catalog vs current catalog + draft): the tools that join
    or leave its bundle, the tools moving between loaded and deferred, and its recorded calls that would fare
    differently."""

    loaded_added: tuple[str, ...]
    loaded_removed: tuple[str, ...]
    deferred_added: tuple[str, ...]
    deferred_removed: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    now_loaded: tuple[str, ...] = ()  # deferred before, loaded under the draft
    now_deferred: tuple[str, ...] = ()  # loaded before, deferred under the draft
    call_changes: tuple[CallChange, ...] = ()

    @property
    def token_change(self) -> int:
        return self.tokens_after - self.tokens_before

    def _calls(self, *, before: CallStatus | None = None, after: CallStatus | None = None) -> tuple[str, ...]:
        return tuple(
            change.name for change in self.call_changes
            if (before is None or change.before == before) and (after is None or change.after == after)
        )  # fmt: skip

    @property
    def calls_needing_approval(self) -> tuple[str, ...]:
        """Called tools whose calls ran straight away and would now wait for an operator's approval."""
        return self._calls(before=CallStatus.RUNS, after=CallStatus.NEEDS_APPROVAL)

    @property
    def calls_no_longer_needing_approval(self) -> tuple[str, ...]:
        return self._calls(before=CallStatus.NEEDS_APPROVAL, after=CallStatus.RUNS)

    @property
    def calls_denied(self) -> tuple[str, ...]:
        return self._calls(after=CallStatus.DENIED)

    @property
    def calls_allowed(self) -> tuple[str, ...]:
        """Called tools the current catalog denies (the policy changed since) that the draft allows again."""
        return self._calls(before=CallStatus.DENIED)

    @property
    def changed(self) -> bool:
        return bool(
            self.loaded_added or self.loaded_removed or self.deferred_added or self.deferred_removed
            or self.now_loaded or self.now_deferred or self.call_changes
        )  # fmt: skip


def call_status(name: str, bundle: CapabilityBundle, entries: Mapping[str, CatalogEntry]) -> CallStatus:
    if name not in bundle.searchable_names():
        return CallStatus.DENIED
    policy = entries[name].policy
    assert policy is not None  # the bundle offers only tools whose policy allows them (bundle.denial_reason)
    return CallStatus.NEEDS_APPROVAL if policy.requires_confirmation else CallStatus.RUNS


def simulate_policy(
    tool_name: str, draft: Snapshot, replays: Sequence[Replay], *, catalog: Sequence[CatalogEntry]
) -> list[SimulatedRequest]:
    """Build each replayed request's bundle with the tool's current policy and with `draft`, and compare: the
    bundles, and each tool the request called as the runtime would treat a call of it under each bundle.

    Tokens are the schema tokens of the loaded tools plus the archive listing the
    deferred names, the two parts of the prompt a policy changes.
    """
    view = draft_view(draft)
    drafted = [dataclasses.replace(entry, policy=view) if entry.name == tool_name else entry for entry in catalog]
    entries_before = {entry.name: entry for entry in catalog}
    entries_after = {entry.name: entry for entry in drafted}
    results: list[SimulatedRequest] = []
    for replay in replays:
        before = build_bundle(replay.decision, catalog, recommended=replay.recommended)
        after = build_bundle(replay.decision, drafted, recommended=replay.recommended)
        loaded_before, loaded_after = set(before.loaded_names), set(after.loaded_names)
        deferred_before, deferred_after = set(before.deferred_names), set(after.deferred_names)
        offered_before, offered_after = loaded_before | deferred_before, loaded_after | deferred_after
        calls = (
            CallChange(name, call_status(name, before, entries_before), call_status(name, after, entries_after))
            for name in dict.fromkeys(replay.called)
        )
        results.append(
            SimulatedRequest(
                loaded_added=tuple(sorted(loaded_after - offered_before)),
                loaded_removed=tuple(sorted(loaded_before - offered_after)),
                deferred_added=tuple(sorted(deferred_after - offered_before)),
                deferred_removed=tuple(sorted(deferred_before - offered_after)),
                now_loaded=tuple(sorted(deferred_before & loaded_after)),
                now_deferred=tuple(sorted(loaded_before & deferred_after)),
                call_changes=tuple(change for change in calls if change.before != change.after),
                tokens_before=before.loaded_schema_tokens + before.archive_tokens,
                tokens_after=after.loaded_schema_tokens + after.archive_tokens,
            )
        )
    return results


@dataclasses.dataclass(frozen=True)
class SimulationSummary:
    """The counts over all replayed requests; tools and calls count once per request they occur in."""

    requests: int
    changed: int
    tools_added: int
    tools_removed: int
    tools_now_loaded: int
    tools_now_deferred: int
    calls_needing_approval: int
    calls_no_longer_needing_approval: int
    calls_denied: int
    calls_allowed: int
    token_change: int


def summarize_simulation(results: Sequence[SimulatedRequest]) -> SimulationSummary:
    def total(count: Callable[[SimulatedRequest], int]) -> int:
        return sum(count(result) for result in results)

    return SimulationSummary(
        requests=len(results),
        changed=total(lambda r: r.changed),
        tools_added=total(lambda r: len(r.loaded_added) + len(r.deferred_added)),
        tools_removed=total(lambda r: len(r.loaded_removed) + len(r.deferred_removed)),
        tools_now_loaded=total(lambda r: len(r.now_loaded)),
        tools_now_deferred=total(lambda r: len(r.now_deferred)),
        calls_needing_approval=total(lambda r: len(r.calls_needing_approval)),
        calls_no_longer_needing_approval=total(lambda r: len(r.calls_no_longer_needing_approval)),
        calls_denied=total(lambda r: len(r.calls_denied)),
        calls_allowed=total(lambda r: len(r.calls_allowed)),
        token_change=total(lambda r: r.token_change),
    )
