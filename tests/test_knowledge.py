"""Knowledge registry: selection by domain, action and budget; newest version only; staleness; reviews."""

import datetime

import pytest
from django.utils import timezone

from agents import runtime
from agents.models import Conversation, RoutingLog
from agents.turns import create_turn
from catalog.decision import RoutingDecision
from catalog.demo_catalog import load_demo_catalog
from catalog.knowledge import current_snippets, mark_reviewed, revise_snippet, select_snippets, snippet_diff
from catalog.models import Domain, KnowledgeSnippet
from catalog.selectors import stale_snippets
from catalog.tokens import count_tokens
from tests.builders import make_user

pytestmark = pytest.mark.django_db
TODAY = datetime.date(2026, 12, 2)


def snippet(title, *, domain="loyalty", action="create", days_ago=10, interval=90, text="A rule.", **fields):
    domain_row, _ = Domain.objects.get_or_create(name=domain, defaults={"title": domain})
    return KnowledgeSnippet.objects.create(
        domain=domain_row, action=action, title=title, text=text, source="handbook §1", owner="team@example.com",
        last_reviewed=TODAY - datetime.timedelta(days=days_ago), review_interval_days=interval, **fields,
    )  # fmt: skip


def decision(action="create", domains=("loyalty",)):
    return RoutingDecision(action, frozenset(domains), 0.9)


def test_selection_respects_domain_and_puts_the_action_first():
    snippet("Create rules", action="create")
    snippet("General rules", action="answer")
    snippet("Delete rules", action="delete")
    snippet("Web rules", domain="web", action="create")
    titles = [s["title"] for s in select_snippets(decision(), budget_tokens=1000, today=TODAY)]
    assert titles[0] == "Create rules" and "Web rules" not in titles
    assert titles.index("General rules") < titles.index("Delete rules")
    assert select_snippets(decision(domains=()), budget_tokens=1000) == []


def test_selection_stays_within_the_token_budget():
    for index in range(5):
        snippet(f"Rule {index}", text="word " * 40)
    chosen = select_snippets(decision(), budget_tokens=120, today=TODAY)
    cost = sum(count_tokens(f"- {s['title']}: {s['text']} (source: {s['source']})") for s in chosen)
    assert 1 <= len(chosen) < 5 and cost <= 120


def test_only_the_newest_version_is_selected_and_the_old_one_is_kept():
    first = snippet("Tier thresholds", text="Gold at 1000 points.")
    revised = revise_snippet(first, author=make_user(), text="Gold at 1200 points.")
    assert (revised.version, revised.key) == (2, first.key)
    assert KnowledgeSnippet.objects.filter(key=first.key).count() == 2
    assert KnowledgeSnippet.objects.get(pk=first.pk).text == "Gold at 1000 points."
    (selected,) = select_snippets(decision(), budget_tokens=1000, today=TODAY)
    assert (selected["text"], selected["version"]) == ("Gold at 1200 points.", 2)
    assert list(current_snippets().values_list("pk", flat=True)) == [revised.pk]
    diff = snippet_diff(first, revised)
    assert "-Gold at 1000 points." in diff and "+Gold at 1200 points." in diff


def test_revising_an_unknown_field_is_refused():
    with pytest.raises(ValueError):
        revise_snippet(snippet("X"), author=None, domain="web")


def test_staleness_follows_the_date():
    fresh = snippet("Fresh", days_ago=89, interval=90)
    due_today = snippet("Due today", days_ago=90, interval=90)
    overdue = snippet("Overdue", days_ago=91, interval=90)
    assert not fresh.is_stale(TODAY) and not due_today.is_stale(TODAY) and overdue.is_stale(TODAY)
    assert [s.title for s in stale_snippets(TODAY)] == ["Overdue"]
    flags = {s["title"]: s["stale"] for s in select_snippets(decision(), budget_tokens=1000, today=TODAY)}
    assert flags == {"Fresh": False, "Due today": False, "Overdue": True}


def test_marking_reviewed_clears_staleness_and_records_the_reviewer():
    overdue = snippet("Overdue", days_ago=200)
    reviewer = make_user()
    mark_reviewed(overdue, user=reviewer, today=TODAY)
    overdue.refresh_from_db()
    assert overdue.last_reviewed == TODAY and overdue.reviewed_by == reviewer
    assert not stale_snippets(TODAY)


def test_a_turn_flags_stale_knowledge_in_its_routing_log():
    load_demo_catalog()
    KnowledgeSnippet.objects.filter(domain__name="general").update(
        last_reviewed=timezone.localdate() - datetime.timedelta(days=400)
    )
    turn = create_turn(Conversation.objects.create(owner=make_user()), "What time is it in Paris?")
    runtime.run_turn(turn.id)
    log = RoutingLog.objects.get(turn=turn)
    assert log.knowledge and all(item["stale"] for item in log.knowledge)
