"""The contract between the router (agents) and the policy engine (catalog): plain data only.

`RoutingDecision` is what agents.router produces and catalog.policies.bundle reads.
`CatalogEntry` is the read-only view of one tool and its policy that the
bundle rules look at; `load_catalog()` builds them in two queries.
"""

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from catalog.models import Action, Tool
from catalog.search.service import catalog_state

from .deferral import is_deferred

T = TypeVar("T")


class DecisionData(TypedDict):
    """A RoutingDecision as JSON (RoutingLog.decision, the steward's result)."""

    action: str
    domains: list[str]
    confidence: float
    phase: str
    side_query: bool


@dataclass(frozen=True)
class RoutingDecision:
    action: str = Action.ANSWER
    domains: frozenset[str] = frozenset()
    confidence: float = 0.0
    phase: str = ""  # the active workflow's phase; "" outside a workflow
    side_query: bool = False  # a read question asked inside a workflow

    def as_dict(self) -> DecisionData:
        return {
            "action": str(self.action),
            "domains": sorted(self.domains),
            "confidence": round(self.confidence, 3),
            "phase": self.phase,
            "side_query": self.side_query,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RoutingDecision":
        """The inverse of as_dict (a RoutingLog stores that form)."""
        return cls(
            action=data.get("action", Action.ANSWER),
            domains=frozenset(data.get("domains", ())),
            confidence=float(data.get("confidence", 0.0)),
            phase=data.get("phase", ""),
            side_query=bool(data.get("side_query", False)),
        )


@dataclass(frozen=True)
class PolicyView:
    status: str
    operation: str
    risk: str
    domains: frozenset[str]
    workflow_phases: tuple[str, ...]
    aliases: tuple[str, ...]
    requires_confirmation: bool


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    description: str
    input_schema: dict[str, Any]  # JSON Schema
    schema_tokens: int
    enabled: bool
    always_load: bool
    deferred: bool
    policy: PolicyView | None
    # What an MCP server listed beside the schema (empty for other tools); toolhub's /mcp lists it unchanged.
    title: str = ""
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None

    def definition(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }


def entry_for(tool: Tool) -> CatalogEntry:
    policy = getattr(tool, "policy", None)
    view = None
    if policy is not None:
        view = PolicyView(
            status=policy.status,
            operation=policy.operation,
            risk=policy.risk,
            domains=frozenset(domain.name for domain in policy.domains.all()),
            workflow_phases=tuple(policy.workflow_phases),
            aliases=tuple(policy.aliases),
            requires_confirmation=policy.requires_confirmation,
        )
    return CatalogEntry(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        schema_tokens=tool.schema_tokens,
        enabled=tool.enabled,
        always_load=tool.always_load,
        deferred=is_deferred(tool),
        policy=view,
        title=tool.title,
        output_schema=tool.output_schema,
        annotations=tool.annotations,
    )


def load_catalog() -> list[CatalogEntry]:
    """Every tool with its policy, as plain values."""
    tools = Tool.objects.select_related("policy").prefetch_related("policy__domains")
    return [entry_for(tool) for tool in tools]


_current: tuple[tuple[int, str], tuple[CatalogEntry, ...]] | None = None


class _Derived:
    """What is computed from one catalog tuple (the whole catalog, walked once), kept while that tuple is the one
    asked about: current_catalog() hands out the same tuple until the catalog state moves, so a request reads an
    entry by name or the names a decision allows without walking thousands of entries again. Only what the entries
    alone decide: two states with no tools share the empty tuple."""

    MAX = 256

    def __init__(self) -> None:
        self._catalog: tuple[CatalogEntry, ...] | None = None
        self._values: dict[Hashable, Any] = {}
        self._lock = threading.Lock()  # requests run on several threads

    def get(self, catalog: Sequence[CatalogEntry], key: Hashable, make: Callable[[], T]) -> T:
        if not isinstance(catalog, tuple):  # a list may change under us: computed each time
            return make()
        with self._lock:
            if catalog is self._catalog and key in self._values:
                known: T = self._values[key]
                return known
        value = make()
        with self._lock:
            if catalog is not self._catalog or len(self._values) >= self.MAX:
                self._catalog, self._values = catalog, {}
            self._values[key] = value
        return value


derived = _Derived()


def entries_by_name(catalog: Sequence[CatalogEntry]) -> Mapping[str, CatalogEntry]:
    """The catalog's entries by name (read-only: shared by every request on the same catalog)."""
    return derived.get(catalog, "by name", lambda: {entry.name: entry for entry in catalog})


def current_catalog() -> tuple[CatalogEntry, ...]:
    """The process's copy of the catalog, reloaded when the catalog state moves (one query per call)."""
    global _current
    state = catalog_state()
    cached = _current
    if cached is None or cached[0] != state:
        cached = (state, tuple(load_catalog()))
        _current = cached
    return cached[1]
