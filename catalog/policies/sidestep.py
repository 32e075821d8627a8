"""Tools that sidestep a restriction: when a draft puts a tool behind approval or denies it, the other tools that
still run straight away and return the same data undo it (a policy that guards get_member_balance is sidestepped by
get_member and get_points_ledger, which return the balance too). The policy simulation warns with the evidence.

What a tool returns is read from its output schema (an MCP tool's outputSchema) and from its recorded results (the
keys of the JSON it returned lately, from the apps that record tool results: agents registers its turn events, so
this module never imports the app that records them). The restricted tool's terms are the words of its name and of
the fields it returns, less its verb, the words of its own arguments (the member it is asked about is not what it
guards), words every record has (id, name, status, ...) and words too common in the catalog to tell tools apart
(in the names or descriptions of more than COMMON_SHARE of its tools: "points" in a loyalty catalog). Another tool
is named when it is a read (read, list, search) that its active policy runs without approval and one of the fields
it returns carries one of those terms, or, when nothing of it was recorded and it has no output schema, its
description says it does. A heuristic that shows its evidence: each warning names the fields or the words it
matched, for the operator to judge.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from catalog.models import READ_ONLY_OPERATIONS, ToolPolicy

from .decision import CatalogEntry
from .versions import Snapshot

# (tool names, how many results per tool) -> {tool name: the contents of its latest results, newest first}
ResultSource = Callable[[Sequence[str], int], Mapping[str, Sequence[str]]]
_result_sources: list[ResultSource] = []

RESULTS_PER_TOOL = 5
MAX_WARNINGS = 12
COMMON_SHARE = 0.1  # a word in more than this share of the catalog's tools (and more than 5) tells none apart
VERBS = frozenset({"get", "list", "search", "find", "fetch", "read", "show", "lookup", "query", "view", "describe"})
# Words of fields every kind of record has: sharing them says nothing about sharing what a policy guards.
GENERIC = frozenset({
    "id", "ids", "uuid", "key", "name", "title", "type", "kind", "status", "state", "created", "updated", "deleted",
    "at", "on", "by", "of", "to", "from", "in", "the", "and", "or", "is", "has", "count", "total", "page", "next",
    "previous", "cursor", "limit", "offset", "more", "items", "results", "result", "data", "url", "link", "code",
    "message", "error", "ok", "success", "date", "time", "value", "values", "description", "note", "notes", "tags",
})  # fmt: skip
_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]{0,63})"\s*:')
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def register_result_source(source: ResultSource) -> None:
    if source not in _result_sources:
        _result_sources.append(source)


def recorded_results(names: Sequence[str], per_tool: int = RESULTS_PER_TOOL) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for source in _result_sources:
        for name, contents in source(names, per_tool).items():
            found.setdefault(name, []).extend(contents)
    return found


@dataclasses.dataclass(frozen=True)
class Sidestep:
    """Another tool that returns what the restricted one does: the fields (or, from its description, the words) that
    matched, and where they were seen ("output schema", "recorded results" or "description")."""

    tool: str
    matched: tuple[str, ...]
    evidence: str


def restricts(draft: Snapshot) -> bool:
    """Whether the draft keeps its tool's calls from running straight away: denied, not active, or behind approval."""
    return draft["status"] != ToolPolicy.Status.ACTIVE or bool(draft["requires_confirmation"])


def words(text: str) -> set[str]:
    """The lower-case words of a name or a phrase (snake_case, camelCase, kebab-case, spaces)."""
    return {word.lower() for word in _WORD.findall(text) if len(word) > 1}


def schema_fields(schema: Any, *, depth: int = 0) -> set[str]:
    """Every property name of a JSON Schema, nested objects and array items included."""
    if not isinstance(schema, dict) or depth > 6:
        return set()
    fields: set[str] = set()
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            fields.add(str(name))
            fields |= schema_fields(sub, depth=depth + 1)
    for nested in ("items", "additionalProperties"):
        fields |= schema_fields(schema.get(nested), depth=depth + 1)
    for combined in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(combined) or ():
            fields |= schema_fields(sub, depth=depth + 1)
    return fields


def result_fields(contents: Iterable[str]) -> set[str]:
    """The keys of the JSON objects in recorded results (a cut-off result still gives the keys it holds)."""
    return {key for content in contents for key in _KEY.findall(content or "")}


def common_words(catalog: Sequence[CatalogEntry], candidates: set[str]) -> set[str]:
    """Of `candidates`, those in the name or description of more than COMMON_SHARE of the catalog's tools."""
    counts = dict.fromkeys(candidates, 0)
    for entry in catalog:
        for word in words(f"{entry.name} {entry.description}") & candidates:
            counts[word] += 1
    limit = max(5, COMMON_SHARE * len(catalog))
    return {word for word, count in counts.items() if count > limit}


def sidesteps(tool_name: str, draft: Snapshot, catalog: Sequence[CatalogEntry],
              results: Mapping[str, Sequence[str]] | None = None) -> list[Sidestep]:  # fmt: skip
    """The permitted reads that return what `draft` restricts of `tool_name`, most matches first; none when the
    draft restricts nothing. `results` are recorded results by tool (read from the registered sources when None)."""
    target = next((entry for entry in catalog if entry.name == tool_name), None)
    if target is None or not restricts(draft):
        return []
    others = [entry for entry in catalog if entry.name != tool_name and entry.enabled and entry.policy is not None
              and entry.policy.status == ToolPolicy.Status.ACTIVE and not entry.policy.requires_confirmation
              and entry.policy.operation in READ_ONLY_OPERATIONS]  # fmt: skip
    if results is None:
        results = recorded_results([tool_name, *(entry.name for entry in others)])
    own_arguments = set().union(*(words(field) for field in schema_fields(target.input_schema)))
    returned = schema_fields(target.output_schema) | result_fields(results.get(tool_name, ()))
    terms = (words(target.name) - VERBS) | set().union(*(words(field) for field in returned))
    terms -= own_arguments | GENERIC | VERBS
    terms -= common_words(catalog, terms)
    if not terms:
        return []
    found: list[Sidestep] = []
    for entry in others:
        from_schema, from_results = schema_fields(entry.output_schema), result_fields(results.get(entry.name, ()))
        fields = from_schema | from_results
        if fields:
            matched = tuple(sorted(field for field in fields if words(field) & terms))
            if matched:
                evidence = " and ".join(where for where, seen in (("output schema", from_schema),
                                                                  ("recorded results", from_results))
                                        if seen.intersection(matched))  # fmt: skip
                found.append(Sidestep(entry.name, matched, evidence))
            continue
        said = tuple(sorted(words(entry.description) & terms))
        if said:
            found.append(Sidestep(entry.name, said, "description"))
    found.sort(key=lambda sidestep: (sidestep.evidence == "description", -len(sidestep.matched), sidestep.tool))
    return found[:MAX_WARNINGS]
