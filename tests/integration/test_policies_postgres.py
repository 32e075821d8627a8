"""Policy saves under real concurrency on PostgreSQL: editors never overwrite each other, never a 500."""

import pytest

from catalog.models import PolicyVersion, ToolPolicy
from catalog.policies.versions import PolicyConflict, save_policy_draft, snapshot
from tests.support.builders import at_once, make_policy, make_tool, make_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DRAFT = {"domains": ["general"], "operation": "read", "risk": "low", "workflow_phases": [], "aliases": [],
         "requires_confirmation": False, "status": ToolPolicy.Status.ACTIVE}  # fmt: skip


def test_conflict_eight_editors_writing_a_new_tools_first_policy_at_once_make_one_version():
    # No policy row exists to lock yet: the tool row is what serializes the first save.
    tool = make_tool("fresh_from_mcp")
    editor = make_user("editor")
    outcomes = at_once(8, lambda i: save_policy_draft(tool, draft=DRAFT, author=editor, note=f"editor {i}",
                                                      base_version=0))  # fmt: skip
    saved = [value for kind, value in outcomes if kind == "ok"]
    refused = [value for kind, value in outcomes if kind == "error"]
    assert len(saved) == 1 and len(refused) == 7
    assert all(isinstance(error, PolicyConflict) for error in refused), refused
    assert ToolPolicy.objects.filter(tool=tool).count() == 1
    assert list(PolicyVersion.objects.filter(policy__tool=tool).values_list("number", "note")) == [(1, saved[0].note)]


def test_conflict_eight_editors_from_one_version_make_one_new_version():
    policy = make_policy(make_tool("busy_tool"))
    editor = make_user("editor")
    base = snapshot(policy) | {"domains": ["general"]}
    outcomes = at_once(8, lambda i: save_policy_draft(policy.tool, draft=base | {"aliases": [f"alias {i}"]},
                                                      author=editor, note=f"editor {i}",
                                                      base_version=policy.version))  # fmt: skip
    saved = [value for kind, value in outcomes if kind == "ok"]
    assert len(saved) == 1
    assert all(isinstance(value, PolicyConflict) for kind, value in outcomes if kind == "error")
    policy.refresh_from_db()
    assert policy.version == policy.versions.count() == 2
    assert policy.aliases == [f"alias {saved[0].note.split()[-1]}"]
