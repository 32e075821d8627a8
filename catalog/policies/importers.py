"""Import tool definitions (and optional policies) into the catalog, all or nothing.

A definition is a dict: name, description, input_schema, and optionally
source, is_mcp, always_load, should_defer, enabled, policy. Every definition
is validated before anything is written; one bad definition rejects the whole
import with every error named.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from catalog.models import Domain, Tool, ToolPolicy

from .versions import record_policy_version

TOOL_FIELDS = ("description", "input_schema", "source", "is_mcp", "always_load", "should_defer", "enabled")


class ToolImportError(ValueError):
    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        lines = [f"{name}: {'; '.join(messages)}" for name, messages in errors.items()]
        super().__init__("Tool import rejected, nothing saved:\n" + "\n".join(lines))


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    policies_created: list[str] = field(default_factory=list)


def _messages(error: ValidationError) -> list[str]:
    if hasattr(error, "error_dict"):
        return [f"{key}: {message}" for key, errors in error.message_dict.items() for message in errors]
    return list(error.messages)


def _build(definition: dict[str, Any]) -> Tool:
    tool = Tool(name=definition.get("name", ""))
    for name in TOOL_FIELDS:
        if name in definition:
            setattr(tool, name, definition[name])
    return tool


def validate_definitions(definitions: Sequence[object]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    seen: set[str] = set()
    domain_names = set(Domain.objects.values_list("name", flat=True))
    for index, definition in enumerate(definitions):
        label = str(definition.get("name") or f"#{index}") if isinstance(definition, dict) else f"#{index}"
        if not isinstance(definition, dict):
            errors[label] = ["a tool definition must be an object"]
            continue
        if label in seen:
            errors.setdefault(label, []).append("duplicate name in this import")
        seen.add(label)
        try:
            # Uniqueness is not an error here: an existing name is updated.
            _build(definition).full_clean(validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            errors.setdefault(label, []).extend(_messages(exc))
        policy = definition.get("policy")
        if policy is not None:
            errors_of_policy = _policy_errors(policy, domain_names)
            if errors_of_policy:
                errors.setdefault(label, []).extend(errors_of_policy)
    return errors


def _policy_errors(data: object, domain_names: set[str]) -> list[str]:
    if not isinstance(data, dict):
        return ["policy: must be an object"]
    problems: list[str] = []
    unknown = [name for name in data.get("domains", []) if name not in domain_names]
    if unknown:
        problems.append(f"policy: unknown domains {', '.join(unknown)}")
    policy = _build_policy(Tool(), data)
    try:
        policy.full_clean(exclude=["tool", "version"])
    except ValidationError as exc:
        problems.extend(f"policy {message}" for message in _messages(exc))
    return problems


def import_tools(
    definitions: list[dict[str, Any]], *, source: str = Tool.Source.IMPORT, author: User | None = None
) -> ImportResult:
    """Create or update tools by name; create missing policies given with them."""
    definitions = [{"source": source, **d} if isinstance(d, dict) else d for d in definitions]
    errors = validate_definitions(definitions)
    if errors:
        raise ToolImportError(errors)
    result = ImportResult()
    domains = {domain.name: domain for domain in Domain.objects.all()}
    existing = {tool.name: tool for tool in Tool.objects.filter(name__in=[d["name"] for d in definitions])}
    with transaction.atomic():
        for definition in definitions:
            tool = existing.get(definition["name"])
            if tool is None:
                tool = _build(definition)
                tool.save()
                result.created.append(tool.name)
            else:
                before = (tool.schema_hash, *(getattr(tool, name) for name in TOOL_FIELDS))
                for name in TOOL_FIELDS:
                    if name in definition:
                        setattr(tool, name, definition[name])
                tool.save()
                after = (tool.schema_hash, *(getattr(tool, name) for name in TOOL_FIELDS))
                (result.unchanged if before == after else result.updated).append(tool.name)
            policy_data = definition.get("policy")
            if policy_data and not ToolPolicy.objects.filter(tool=tool).exists():
                _create_policy(tool, policy_data, domains, author)
                result.policies_created.append(tool.name)
    return result


def _build_policy(tool: Tool, data: dict[str, Any]) -> ToolPolicy:
    return ToolPolicy(
        tool=tool,
        operation=data.get("operation", ""),
        risk=data.get("risk", "low"),
        workflow_phases=data.get("workflow_phases", []),
        aliases=data.get("aliases", []),
        requires_confirmation=data.get("requires_confirmation", False),
        status=data.get("status", ToolPolicy.Status.DRAFT),
    )


def _create_policy(tool: Tool, data: dict[str, Any], domains: dict[str, Domain], author: User | None) -> ToolPolicy:
    policy = _build_policy(tool, data)
    policy.save()
    policy.domains.set([domains[name] for name in data.get("domains", [])])
    record_policy_version(policy, author=author, note="imported")
    return policy
