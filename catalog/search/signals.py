"""Bump CatalogState.version when anything the search index reads changes; never does more than that."""

import uuid

from django.db.models import F
from django.db.models.signals import m2m_changed, post_delete, post_save

from catalog.models import CatalogState, Domain, Tool, ToolExample, ToolPolicy


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


def connect() -> None:
    post_save.connect(bump_for_example, sender=ToolExample, dispatch_uid="catalog_version_save_ToolExample")
    post_delete.connect(bump_for_example, sender=ToolExample, dispatch_uid="catalog_version_delete_ToolExample")
    for model in (Tool, ToolPolicy, Domain):
        post_save.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_save_{model.__name__}")
        post_delete.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_delete_{model.__name__}")
    m2m_changed.connect(
        bump_catalog_version, sender=ToolPolicy.domains.through, dispatch_uid="catalog_version_policy_domains"
    )
