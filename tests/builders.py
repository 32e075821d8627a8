"""Small builders for tests: a tool, a policy, a user in a role."""

import importlib
import threading

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from catalog.models import Domain, Tool, ToolPolicy
from catalog.policies import record_policy_version
from toolhub.roles import ensure_groups

OBJECT_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def make_tool(name="lookup_thing", **fields) -> Tool:
    values = {"description": "Look up a thing by its query.", "input_schema": OBJECT_SCHEMA} | fields
    return Tool.objects.create(name=name, **values)


def make_policy(tool, *, domains=("general",), author=None, **fields) -> ToolPolicy:
    values = {"operation": "read", "risk": "low", "status": ToolPolicy.Status.ACTIVE} | fields
    policy = ToolPolicy.objects.create(tool=tool, **values)
    policy.domains.set([Domain.objects.get_or_create(name=name, defaults={"title": name})[0] for name in domains])
    record_policy_version(policy, author=author, note="test")
    return policy


def make_user(username="ops", role="operator", password="a-long-test-password"):
    # The role groups are made once per test database state (ensure_groups costs ~10 ms; tests make ~2,000 users).
    group = Group.objects.filter(name=role).first() or ensure_groups()[role]
    user = get_user_model().objects.create_user(username=username, password=password)
    user.groups.add(group)
    return user


def restore_migrated_routing_data() -> None:
    """The action words (migration 0003), intent examples (0008, 0011, 0015) and mood words (0010) the
    router reads, as migrated.

    A transactional test's flush removes them for the tests after it.
    """
    importlib.import_module("agents.migrations.0003_default_action_words").add_words(apps, None)
    importlib.import_module("agents.migrations.0008_default_intent_examples").add_examples(apps, None)
    importlib.import_module("agents.migrations.0010_default_mood_words").add_words(apps, None)
    importlib.import_module("agents.migrations.0011_more_intent_examples").add_examples(apps, None)
    importlib.import_module("agents.migrations.0015_casual_answer_examples").add_examples(apps, None)


def at_once(count: int, work) -> list[tuple[str, object]]:
    """Run work(i) in `count` threads released together by a barrier; ("ok", value) or ("error", exception)."""
    barrier = threading.Barrier(count)
    outcomes: list = [None] * count

    def run(i):
        try:
            barrier.wait(timeout=60)
            outcomes[i] = ("ok", work(i))
        except Exception as exc:  # the outcome is what the test checks
            outcomes[i] = ("error", exc)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return outcomes
