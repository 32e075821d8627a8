"""Small builders for tests: a tool, a policy, a user in a role."""

import datetime
import importlib
import threading

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from agents.models import Message, RoutingLog, Turn, TurnEvent
from catalog.models import Domain, Tool, ToolPolicy
from catalog.policies.versions import record_policy_version
from toolhub.roles import ensure_groups

# PBKDF2's million rounds cost a quarter of a CPU second per user made or logged in with a password.
FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
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
    # The role groups are in every test database from the start (tests/conftest.py: django_db_setup); a test that
    # removed them gets them again here.
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


# Retention's builders (tests/agents/turns/test_retention.py, tests/integration/test_retention_worker.py):
# turns 40 days old.
NOW = timezone.now()
OLD = NOW - datetime.timedelta(days=40)


def make_turn(conversation, *, status=Turn.Status.DONE, when=OLD, events=3, turn_ms=120, steward_ms=30, saved=100):
    """A turn created and (if finished) finished at `when`, with a user and an assistant message, `events` events
    and a routing log."""
    finished = status in Turn.ENDED
    turn = Turn.objects.create(conversation=conversation, status=status, finished_at=when if finished else None)
    Turn.objects.filter(pk=turn.pk).update(created_at=when)
    Message.objects.bulk_create(
        [Message(conversation=conversation, turn=turn, role=role, content="x") for role in ("user", "assistant")]
    )
    TurnEvent.objects.bulk_create([TurnEvent(turn=turn, sequence=i, type=TurnEvent.Type.DELTA) for i in range(events)])
    log = RoutingLog.objects.create(turn=turn, query="q", decision={}, steward_ms=steward_ms, turn_ms=turn_ms,
                                    catalog_schema_tokens=saved, fallback=status == Turn.Status.FAILED)  # fmt: skip
    RoutingLog.objects.filter(pk=log.pk).update(created_at=when)
    return turn


def make_old_turns(conversation, count: int) -> list[int]:
    """`count` finished turns 40 days old with 3 events, 2 messages and a routing log each, in a few statements."""
    turns = Turn.objects.bulk_create(
        [Turn(conversation=conversation, status=Turn.Status.DONE, finished_at=OLD) for _ in range(count)]
    )
    ids = [turn.pk for turn in turns]
    Turn.objects.filter(pk__in=ids).update(created_at=OLD)
    TurnEvent.objects.bulk_create(
        [TurnEvent(turn_id=pk, sequence=i, type=TurnEvent.Type.DELTA) for pk in ids for i in range(3)]
    )
    Message.objects.bulk_create(
        [Message(conversation=conversation, turn_id=pk, role=role) for pk in ids for role in ("user", "assistant")]
    )
    RoutingLog.objects.bulk_create([RoutingLog(turn_id=pk, query="q", decision={}, turn_ms=100) for pk in ids])
    return ids
