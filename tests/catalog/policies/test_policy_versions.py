"""Every policy change is an immutable version; rollback moves the active pointer."""

import pytest
from django.core.exceptions import ValidationError

from catalog.policies.versions import record_policy_version, rollback_policy
from tests.support.builders import make_policy, make_tool, make_user


@pytest.mark.django_db
def test_each_recorded_change_is_a_new_numbered_version_with_author():
    author = make_user()
    policy = make_policy(make_tool(), author=author)
    assert policy.version == 1
    policy.risk = "medium"
    policy.save()
    version = record_policy_version(policy, author=author, note="riskier than thought")
    assert (version.number, policy.version) == (2, 2)
    assert version.snapshot["risk"] == "medium"
    assert version.snapshot["domains"] == ["general"]
    assert version.author == author
    assert list(policy.versions.values_list("number", flat=True)) == [2, 1]


@pytest.mark.django_db
def test_policy_versions_cannot_be_changed_or_deleted():
    policy = make_policy(make_tool())
    version = policy.versions.get()
    version.note = "rewritten history"
    with pytest.raises(ValidationError):
        version.save()
    with pytest.raises(ValidationError):
        version.delete()
    version.refresh_from_db()
    assert version.note == "test"


@pytest.mark.django_db
def test_rollback_restores_the_snapshot_and_moves_the_pointer():
    policy = make_policy(make_tool(), domains=("general",))
    policy.risk, policy.aliases = "high", ["alias"]
    policy.save()
    record_policy_version(policy, note="v2")
    policy = rollback_policy(policy, number=1)
    policy.refresh_from_db()
    assert (policy.version, policy.risk, policy.aliases) == (1, "low", [])
    assert policy.versions.count() == 2
