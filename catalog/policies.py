"""Writes to tool policies: every change becomes an immutable PolicyVersion.

The active policy is ToolPolicy's row; `ToolPolicy.version` points at the
PolicyVersion it equals. Rollback copies an old snapshot back and moves the
pointer. Never edit a PolicyVersion.
"""

from django.db import transaction
from django.db.models import Max

from .models import Domain, PolicyVersion, ToolPolicy

SNAPSHOT_FIELDS = ("operation", "risk", "workflow_phases", "aliases", "requires_confirmation", "status")


def snapshot(policy: ToolPolicy) -> dict:
    data = {field: getattr(policy, field) for field in SNAPSHOT_FIELDS}
    data["domains"] = sorted(domain.name for domain in policy.domains.all())
    return data


@transaction.atomic
def record_policy_version(policy: ToolPolicy, *, author=None, note: str = "") -> PolicyVersion:
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
def rollback_policy(policy: ToolPolicy, *, number: int) -> ToolPolicy:
    """Make version `number` active again: copy its snapshot back, move the pointer."""
    policy = ToolPolicy.objects.select_for_update().get(pk=policy.pk)
    version = policy.versions.get(number=number)
    data = dict(version.snapshot)
    domain_names = data.pop("domains")
    for field, value in data.items():
        setattr(policy, field, value)
    policy.version = version.number
    policy.save()
    policy.domains.set(Domain.objects.filter(name__in=domain_names))
    return policy
