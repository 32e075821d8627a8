"""Bump CatalogState.version when anything read once per catalog state changes; never does more than that.

What is read once per state: the search index (tools, policies, domains, approved examples), and an MCP tool's
route with its server's row (catalog.mcp_client.sync.mcp_route). agents.apps adds what agents reads so.
"""

import uuid

from django.db.models import F
from django.db.models.signals import m2m_changed, post_delete, post_save

from catalog.models import CatalogState, Domain, McpServer, Tool, ToolExample, ToolPolicy


def bump_catalog_version(action: str = "", **_) -> None:
    if action and not action.startswith("post_"):
        return  # m2m_changed also fires before the change; count each change once
    # An UPDATE ... SET version = version + 1 in the database: concurrent writers never lose a bump.
    stamp = uuid.uuid4().hex
    state = CatalogState.objects.filter(pk=CatalogState.SINGLETON_ID)
    if not state.update(version=F("version") + 1, stamp=stamp):
        CatalogState.objects.get_or_create(pk=CatalogState.SINGLETON_ID, defaults={"version": 1, "stamp": stamp})


def bump_for_example(instance: ToolExample, created: bool = False, **kwargs) -> None:
    """A new pending example is not in the index: only it changes nothing the index reads."""
    if created and not instance.approved:
        return
    bump_catalog_version()


# What a sync records of itself on its server's row: no setting of how to reach the server. Its list of tool names
# moves with the tools it adds, changes or disables, each a Tool save that bumps.
SERVER_SYNC_FIELDS = frozenset({
    "status", "status_message", "last_synced_at", "sync_phase", "sync_done", "sync_total", "sync_report",
    "sync_updated_at", "tool_names", "missing_tool_names", "updated_at",
})  # fmt: skip


def bump_for_server(update_fields=None, **kwargs) -> None:
    """A server's settings and its enabling are read once per state: a save of any of them (or a save that names
    no fields, as forms and the admin do) moves it; a sync's record of itself does not. (Its OAuth client and
    tokens are read by the connection's grant store from its own row, catalog.mcp_oauth.grants.)"""
    if update_fields is not None and set(update_fields) <= SERVER_SYNC_FIELDS:
        return
    bump_catalog_version()


def connect() -> None:
    post_save.connect(bump_for_example, sender=ToolExample, dispatch_uid="catalog_version_save_ToolExample")
    post_delete.connect(bump_for_example, sender=ToolExample, dispatch_uid="catalog_version_delete_ToolExample")
    for model in (Tool, ToolPolicy, Domain):
        post_save.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_save_{model.__name__}")
        post_delete.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_delete_{model.__name__}")
    post_save.connect(bump_for_server, sender=McpServer, dispatch_uid="catalog_version_save_McpServer")
    post_delete.connect(bump_catalog_version, sender=McpServer, dispatch_uid="catalog_version_delete_McpServer")
    m2m_changed.connect(
        bump_catalog_version, sender=ToolPolicy.domains.through, dispatch_uid="catalog_version_policy_domains"
    )
