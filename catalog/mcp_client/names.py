"""Namespaces: the catalog name of each MCP server's tool, and renames when a server's prefix changes.

An MCP tool keeps the name its server gives it while no other tool has that
name; on a clash (a builtin tool, an imported tool, another server's tool, or
toolhub's search tool) it is named `<prefix>__<name>` with its server's prefix,
and the sync report says why. A name once given stays (clients and prompts know
it): a prefixed tool stays prefixed when the clash goes away, and follows the
prefix when an operator changes it; its policy and examples follow, since they
belong to the tool row, not to the name. Builtin tools are never renamed.

Names the model and MCP clients see follow both rule sets at once: the MCP
spec's (SEP-986: 1-128 of A-Z a-z 0-9 _ - .) and the OpenAI function name rule
(1-64 of A-Z a-z 0-9 _ -), i.e. catalog.models.schemas.TOOL_NAME_PATTERN. A server's
dots become underscores and a name past 64 characters is cut and ends in a hash
of the server's name for it, so two long names never meet. The server's own
name is kept (Tool.upstream_name) and is what toolhub calls it by.

Never talks to a server; renames happen in one transaction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from catalog.models import McpServer, Tool
from catalog.models.schemas import MAX_TOOL_NAME_LENGTH

SEPARATOR = "__"
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")  # the protocol's rule (SEP-986)
_HASH_CHARS = 6


def upstream_name_problem(name: object) -> str | None:
    """Why a server's tool name cannot be taken, or None."""
    if isinstance(name, str) and MCP_TOOL_NAME.match(name):
        return None
    shown = name if isinstance(name, str) else type(name).__name__
    return (
        f"{shown!r} is not a valid MCP tool name (1-128 characters: letters, digits, '_', '-' or '.'); "
        "the server must rename it"
    )


def _fit(name: str, upstream: str) -> str:
    if len(name) <= MAX_TOOL_NAME_LENGTH:
        return name
    digest = hashlib.sha256(upstream.encode()).hexdigest()[:_HASH_CHARS]
    return f"{name[: MAX_TOOL_NAME_LENGTH - _HASH_CHARS - 1].rstrip('_-')}_{digest}"


def plain_name(upstream: str) -> str:
    """The catalog name of a server's tool without a prefix."""
    return _fit(upstream.replace(".", "_"), upstream)


def prefixed_name(prefix: str, upstream: str) -> str:
    return _fit(f"{prefix}{SEPARATOR}{upstream.replace('.', '_')}", upstream)


def is_prefixed(name: str, upstream: str) -> bool:
    return name != plain_name(upstream)


# --- who has which name ------------------------------------------------------------------------------


def names_owned_by(server: McpServer) -> set[str]:
    return set(server.tool_names) | set(server.missing_tool_names)


def taken_names(server: McpServer) -> dict[str, str]:
    """Catalog names this server's tools may not take: name -> who has it (for the message).

    A tool of source MCP that no server owns is not in the way: the server that serves a tool of that name adopts
    it with its policy (the demo catalog ships the Loyalty tools before their server is synced).
    """
    owners: dict[str, str] = {}
    for other in McpServer.objects.exclude(pk=server.pk).only("name", "tool_names", "missing_tool_names"):
        for name in names_owned_by(other):
            owners[name] = f"MCP server {other.name!r}'s tool"
    ours = names_owned_by(server)
    taken = {settings.TOOLHUB_SEARCH_TOOL: "toolhub's search tool"}
    for name, source in Tool.objects.values_list("name", "source"):
        if name in ours:
            continue
        if name in owners:
            taken[name] = owners[name]
        elif source != Tool.Source.MCP:
            taken[name] = f"the {source} tool"
    for name, owner in owners.items():
        taken.setdefault(name, owner)
    return taken


@dataclass
class Naming:
    """The catalog name of each of a server's tools (by the server's name for it), or why it cannot have one."""

    names: dict[str, str] = field(default_factory=dict)  # upstream name -> catalog name
    prefixed: dict[str, str] = field(default_factory=dict)  # upstream name -> why it carries the prefix (new)
    rejected: dict[str, str] = field(default_factory=dict)  # upstream name -> why it has no name


def name_tools(
    *, prefix: str, upstream_names: Iterable[str], current: Mapping[str, str], taken: Mapping[str, str]
) -> Naming:
    """Names for a listing; `current`: upstream -> catalog name of the tools the server already has."""
    naming = Naming()
    used: dict[str, str] = {}  # catalog name -> the upstream name that has it in this listing
    for upstream in upstream_names:
        plain = plain_name(upstream)
        if upstream in current:
            # Kept as it was; a prefixed name follows the server's prefix.
            name = prefixed_name(prefix, upstream) if is_prefixed(current[upstream], upstream) else current[upstream]
        elif plain in taken:
            name = prefixed_name(prefix, upstream)
            naming.prefixed[upstream] = f"{taken[plain]} is named {plain}"
        else:
            name = plain
        if name in taken:
            naming.rejected[upstream] = (
                f"named {name} with the prefix, which {taken[name]} has too; change the server's prefix"
            )
        elif name in used:
            naming.rejected[upstream] = f"it would be named {name}, as this server's {used[name]!r} is"
        else:
            used[name] = upstream
            naming.names[upstream] = name
    naming.prefixed = {upstream: why for upstream, why in naming.prefixed.items() if upstream in naming.names}
    return naming


def current_names(server: McpServer) -> dict[str, str]:
    """upstream name -> catalog name of the tools the server has (served now or missing)."""
    rows = Tool.objects.filter(name__in=names_owned_by(server)).values_list("upstream_name", "name")
    return {upstream or name: name for upstream, name in rows}


def prefixed_tools(server: McpServer) -> list[tuple[str, str]]:
    """(catalog name, the server's name) of the server's tools that carry its prefix, for its page."""
    return sorted((name, upstream) for upstream, name in current_names(server).items() if is_prefixed(name, upstream))


# --- a prefix change ---------------------------------------------------------------------------------


def prefix_renames(server: McpServer, new_prefix: str) -> dict[str, str]:
    """old name -> new name of the server's prefixed tools under `new_prefix`; ValidationError on a clash."""
    taken = taken_names(server)
    renames, clashes = {}, []
    for upstream, name in current_names(server).items():
        if not is_prefixed(name, upstream):
            continue
        new = prefixed_name(new_prefix, upstream)
        if new in taken:
            clashes.append(f"{new} ({taken[new]} has that name)")
        elif new != name:
            renames[name] = new
    if clashes:
        raise ValidationError(
            "With this prefix, some tools would take names others have: %(clashes)s.",
            code="prefix_clash",
            params={"clashes": ", ".join(sorted(clashes))},
        )
    return renames


@transaction.atomic
def rename_tools(server: McpServer, renames: Mapping[str, str]) -> None:
    """Give the server's tools their new names; policies, examples and embeddings stay with each row."""
    if not renames:
        return
    server = McpServer.objects.select_for_update().get(pk=server.pk)
    tools = list(Tool.objects.select_for_update().filter(name__in=renames))
    new_names = {tool.pk: renames[tool.name] for tool in tools}
    # Through a free name first: two tools may swap names (a -> b while b -> a).
    for tool in tools:
        tool.upstream_name = tool.upstream_name or tool.name
        Tool.objects.filter(pk=tool.pk).update(name=f"renaming-{tool.pk}", upstream_name=tool.upstream_name)
    for tool in tools:
        tool.name = new_names[tool.pk]
        tool.save()  # validates the name, updates its hash, bumps the catalog version (the search index follows)
    server.tool_names = sorted(renames.get(name, name) for name in server.tool_names)
    server.missing_tool_names = sorted(renames.get(name, name) for name in server.missing_tool_names)
    server.save(update_fields=["tool_names", "missing_tool_names", "updated_at"])
