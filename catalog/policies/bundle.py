"""The capability bundle: from a RoutingDecision and the catalog, what the model sees.

Fail closed. A tool is loaded (full schema), deferred (name only, found through
tool_search) or denied (with the reason); nothing else. The rules, in order:

1. disabled, no policy, or a policy that is not active -> denied;
2. risk high/critical without requires_confirmation -> denied (so every call of
   a risky tool that is exposed waits for approval);
3. a tool bound to workflow phases is allowed only in those phases (and, if it
   writes, only with enough confidence);
4. read-only tools (read/list/search) are allowed for any intent outside a
   workflow; inside one only for a side query, and then at most
   TOOLHUB_SIDE_QUERY_MAX_TOOLS of them;
5. side-effecting tools (create/update/delete/execute) without phases are allowed
   outside workflows only when the action equals their operation, confidence is
   at least TOOLHUB_MIN_CONFIDENCE and a policy domain is among the decision's.

An API client's own tools join the bundle as client-side tools (`with_client_tools`): their
schemas are offered and counted, but no rule above applies to them and toolhub never runs them
(agents.turns.client_tools says who may name them what).

Allowed tools are loaded when not deferred, recommended, or tools of the
current workflow phase, always_load first,
within TOOLHUB_MAX_BUNDLE_SCHEMA_TOKENS; the rest are deferred. Inside a
workflow phase, staged tools show only the current step's schema (staged.py). No rule reads
substrings of tool names. The "all tools" mode exists only for staff in DEBUG,
is logged to the audit logger, and is never the default.
"""

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied

from catalog.models import READ_ONLY_OPERATIONS, Risk, ToolPolicy
from catalog.models.tokens import count_json_tokens, count_tokens

from .archive import archive_section
from .decision import CatalogEntry, PolicyView, RoutingDecision, derived
from .staged import narrow_schema

audit = logging.getLogger("toolhub.audit")

HIGH_RISKS = frozenset({Risk.HIGH, Risk.CRITICAL})


@dataclass(frozen=True)
class LoadedTool:
    name: str
    definition: dict[str, Any]  # the OpenAI function definition the model is given
    schema_tokens: int
    risk: str
    requires_confirmation: bool


@dataclass(frozen=True)
class DeniedTool:
    name: str
    reason: str


@dataclass(frozen=True)
class ClientTool:
    """A tool the API client declared and runs itself: offered to the model, never run by toolhub."""

    name: str
    definition: dict[str, Any]
    schema_tokens: int


@dataclass(frozen=True)
class CapabilityBundle:
    decision: RoutingDecision
    loaded: tuple[LoadedTool, ...]
    deferred: dict[str, tuple[str, ...]]  # domain -> names
    denied: tuple[DeniedTool, ...]
    archive: str
    loaded_schema_tokens: int
    archive_tokens: int
    catalog_schema_tokens: int
    all_tools: bool = False
    notes: tuple[str, ...] = field(default=())
    client: tuple[ClientTool, ...] = field(default=())

    @property
    def loaded_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.loaded)

    @property
    def deferred_names(self) -> tuple[str, ...]:
        return tuple(name for names in self.deferred.values() for name in names)

    def searchable_names(self) -> frozenset[str]:
        """What tool_search may return for this decision: everything policy allows."""
        return frozenset(self.loaded_names) | frozenset(self.deferred_names)

    def holds(self, name: str) -> bool:
        """Whether toolhub runs this tool in this bundle (client tools are never held)."""
        return name in self.loaded_names

    @property
    def client_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.client)

    def is_client(self, name: str) -> bool:
        return name in self.client_names


def with_client_tools(bundle: CapabilityBundle, definitions: Iterable[dict[str, Any]]) -> CapabilityBundle:
    """The bundle plus the client's own tools (OpenAI function definitions), after every toolhub tool."""
    client = tuple(
        ClientTool(d["function"]["name"], d, count_json_tokens(d)) for d in definitions
    )  # fmt: skip
    return dataclasses.replace(bundle, client=client) if client else bundle


def denial_reason(entry: CatalogEntry, decision: RoutingDecision, *, min_confidence: float) -> str | None:
    """Why policy denies this tool for this decision, or None when it is allowed."""
    if not entry.enabled:
        return "tool is disabled"
    policy = entry.policy
    if policy is None:
        return "no policy (fail closed)"
    if policy.status != ToolPolicy.Status.ACTIVE:
        return f"policy is {policy.status}, not active"
    if policy.risk in HIGH_RISKS and not policy.requires_confirmation:
        return f"risk {policy.risk} but the policy does not require confirmation"
    read_only = policy.operation in READ_ONLY_OPERATIONS
    confident = decision.confidence >= min_confidence
    if policy.workflow_phases:
        if decision.phase not in policy.workflow_phases:
            return f"only in workflow phases {', '.join(policy.workflow_phases)}"
        if not read_only and not confident:
            return f"intent unclear (confidence {decision.confidence:.2f} < {min_confidence:.2f})"
        return None
    if read_only:
        if decision.phase and not decision.side_query:
            return f"not part of workflow phase {decision.phase}"
        return None
    if decision.phase:
        return f"not part of workflow phase {decision.phase}"
    if decision.action != policy.operation:  # checked first: the plainer reason when both hold
        return f"{policy.operation} tool, but the request is {decision.action}"
    if not confident:
        return f"intent unclear (confidence {decision.confidence:.2f} < {min_confidence:.2f})"
    if not policy.domains & decision.domains:
        return "outside the request's domains"
    return None


def allowed_names(decision: RoutingDecision, catalog: Sequence[CatalogEntry]) -> frozenset[str]:
    """Names policy allows for this decision (before the side-query bound and the token cap). Computed once per
    catalog and what denial_reason reads of a decision (its confidence only as above or below the gate)."""
    min_confidence = settings.TOOLHUB_MIN_CONFIDENCE
    key = ("allowed", decision.action, decision.domains, decision.phase, decision.side_query,
           decision.confidence >= min_confidence, min_confidence)  # fmt: skip
    return derived.get(
        catalog,
        key,
        lambda: frozenset(
            entry.name for entry in catalog if denial_reason(entry, decision, min_confidence=min_confidence) is None
        ),
    )


def _policy_of(allowed: CatalogEntry) -> PolicyView:
    """The policy of a tool policy allows (denial_reason denies every tool without one)."""
    assert allowed.policy is not None
    return allowed.policy


def _primary_domain(entry: CatalogEntry, decision: RoutingDecision) -> str:
    domains = _policy_of(entry).domains
    matching = sorted(domains & decision.domains)
    return (matching or sorted(domains) or ["other"])[0]


def loaded_tool(entry: CatalogEntry, choices: Mapping[str, str] | None = None) -> LoadedTool:
    """An allowed tool as the model is given it (inside a workflow phase, narrowed to the staged choices)."""
    definition, tokens = entry.definition(), entry.schema_tokens
    policy = _policy_of(entry)
    if choices is not None and policy.workflow_phases:
        # A staged workflow tool shows only the step's part of its schema.
        schema = narrow_schema(entry.input_schema, dict(choices))
        if schema is not entry.input_schema:
            definition["function"]["parameters"] = schema
            tokens = count_json_tokens(definition)
    return LoadedTool(
        name=entry.name,
        definition=definition,
        schema_tokens=tokens,
        risk=policy.risk,
        requires_confirmation=policy.requires_confirmation,
    )


def build_bundle(
    decision: RoutingDecision,
    catalog: Sequence[CatalogEntry],
    *,
    recommended: Iterable[str] = (),
    choices: Mapping[str, str] | None = None,
    all_tools_for: User | None = None,
) -> CapabilityBundle:
    """Decide loaded / deferred / denied for every tool of `catalog`.

    `choices` is the workflow's staged choices (see staged.py); inside a
    workflow phase the staged tools are narrowed to them.
    """
    min_confidence = settings.TOOLHUB_MIN_CONFIDENCE
    recommended = list(dict.fromkeys(recommended))
    if all_tools_for is not None:
        return _all_tools_bundle(decision, catalog, all_tools_for)

    allowed: list[CatalogEntry] = []
    denied: list[DeniedTool] = []
    for entry in catalog:
        reason = denial_reason(entry, decision, min_confidence=min_confidence)
        if reason is None:
            allowed.append(entry)
        else:
            denied.append(DeniedTool(entry.name, reason))

    rank = {name: index for index, name in enumerate(recommended)}

    def priority(entry: CatalogEntry) -> tuple[bool, int, bool, str]:
        domain_match = bool(_policy_of(entry).domains & decision.domains)
        return (not entry.always_load, rank.get(entry.name, len(rank)), not domain_match, entry.name)

    promoted: set[str] = set(recommended)
    # The current phase's tools are the step's tools: loaded even if deferred.
    promoted |= {entry.name for entry in allowed if _policy_of(entry).workflow_phases}
    if decision.phase and decision.side_query:
        side_tools = sorted((e for e in allowed if not _policy_of(e).workflow_phases), key=priority)
        bound = settings.TOOLHUB_SIDE_QUERY_MAX_TOOLS
        for entry in side_tools[bound:]:
            denied.append(DeniedTool(entry.name, f"beyond the side query's bound of {bound} read-only tools"))
        dropped = {entry.name for entry in side_tools[bound:]}
        allowed = [entry for entry in allowed if entry.name not in dropped]
        promoted |= {entry.name for entry in side_tools[:bound]}

    cap = settings.TOOLHUB_MAX_BUNDLE_SCHEMA_TOKENS
    loaded: list[LoadedTool] = []
    deferred: dict[str, list[str]] = {}
    notes: list[str] = []
    total = 0
    staged = (choices or {}) if decision.phase else None
    # Only the few tools that want loading need ranking; the many deferred ones are just grouped.
    to_load = [e for e in allowed if e.always_load or not e.deferred or e.name in promoted]
    stays_deferred = [e for e in allowed if not (e.always_load or not e.deferred or e.name in promoted)]
    domain_of: dict[frozenset[str], str] = {}
    for entry in sorted(to_load, key=priority):
        tool = loaded_tool(entry, staged)
        if entry.always_load or total + tool.schema_tokens <= cap:
            loaded.append(tool)
            total += tool.schema_tokens
            continue
        notes.append(f"{entry.name} deferred: the bundle would exceed {cap} schema tokens")
        stays_deferred.append(entry)
    for entry in stays_deferred:
        domains = _policy_of(entry).domains
        if domains not in domain_of:
            domain_of[domains] = _primary_domain(entry, decision)
        deferred.setdefault(domain_of[domains], []).append(entry.name)

    grouped = {domain: tuple(sorted(names)) for domain, names in sorted(deferred.items())}
    archive = archive_section(grouped)
    return CapabilityBundle(
        decision=decision,
        loaded=tuple(loaded),
        deferred=grouped,
        denied=tuple(sorted(denied, key=lambda d: d.name)),
        archive=archive,
        loaded_schema_tokens=total,
        archive_tokens=count_tokens(archive),
        catalog_schema_tokens=sum(entry.schema_tokens for entry in catalog if entry.enabled),
        notes=tuple(notes),
    )


def _all_tools_bundle(decision: RoutingDecision, catalog: Sequence[CatalogEntry], user: User) -> CapabilityBundle:
    """Debug only: every tool with an active policy, loaded. Still never an unpolicied one."""
    if not (settings.DEBUG and getattr(user, "is_staff", False)):
        raise PermissionDenied("The all-tools mode is only for staff users with DEBUG on.")
    loaded: list[LoadedTool]
    denied: list[DeniedTool]
    loaded, denied = [], []
    for entry in catalog:
        active = entry.enabled and entry.policy is not None and entry.policy.status == ToolPolicy.Status.ACTIVE
        if active:
            loaded.append(loaded_tool(entry))
        else:
            denied.append(DeniedTool(entry.name, "no active policy (fail closed, even in all-tools mode)"))
    audit.warning("all-tools bundle built by %s: %d tools loaded", user.get_username(), len(loaded))
    return CapabilityBundle(
        decision=decision,
        loaded=tuple(loaded),
        deferred={},
        denied=tuple(denied),
        archive="",
        loaded_schema_tokens=sum(tool.schema_tokens for tool in loaded),
        archive_tokens=0,
        catalog_schema_tokens=sum(entry.schema_tokens for entry in catalog if entry.enabled),
        all_tools=True,
        notes=(f"all-tools mode by {user.get_username()}",),
    )
