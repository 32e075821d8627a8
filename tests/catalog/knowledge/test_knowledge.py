"""Knowledge registry: selection by domain, relevance to the request and budget; newest version only; staleness."""

import datetime

import pytest
from django.core import signing
from django.utils import timezone

from agents.models import Conversation, RoutingLog
from agents.turns import runtime
from agents.turns.start import create_turn
from catalog.knowledge.registry import (
    DiffPart,
    current_snippets,
    mark_reviewed,
    review_from_token,
    review_token,
    revise_snippet,
    select_snippets,
    snippet_diff,
    undo_review,
    word_diff,
)
from catalog.knowledge.selectors import stale_snippets
from catalog.models import Domain, KnowledgeSnippet
from catalog.models.tokens import count_tokens
from catalog.policies.decision import RoutingDecision
from catalog.search import embeddings
from tests.support.builders import make_user

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
    # The same words under every action: only the action tells them apart.
    snippet("Rules", key="create-rules", action="create")
    snippet("Rules", key="general-rules", action="answer")
    snippet("Rules", key="delete-rules", action="delete")
    snippet("Rules", key="web-rules", domain="web", action="create")
    request = "Which rules apply to a new earning rule?"
    keys = [s["key"] for s in select_snippets(decision(), text=request, budget_tokens=1000, today=TODAY)]
    # The action's own snippet first, then general knowledge; another action's (no closer to the request) is left out.
    assert keys == ["create-rules", "general-rules"]
    assert select_snippets(decision(domains=()), text=request, budget_tokens=1000) == []
    assert select_snippets(decision(), text="  ", budget_tokens=1000) == []


def test_selection_stays_within_the_token_budget():
    for index in range(5):
        snippet("Rule", key=f"rule-{index}", text="word " * 40)
    assert len(select_snippets(decision(), text="word", budget_tokens=10_000, today=TODAY)) == 5
    chosen = select_snippets(decision(), text="word", budget_tokens=120, today=TODAY)
    cost = sum(count_tokens(f"- {s['title']}: {s['text']} (source: {s['source']})") for s in chosen)
    assert 1 <= len(chosen) < 5 and cost <= 120


def test_only_the_newest_version_is_selected_and_the_old_one_is_kept():
    first = snippet("Tier thresholds", text="Gold at 1000 points.")
    revised = revise_snippet(first, author=make_user(), text="Gold at 1200 points.")
    assert (revised.version, revised.key) == (2, first.key)
    assert KnowledgeSnippet.objects.filter(key=first.key).count() == 2
    assert KnowledgeSnippet.objects.get(pk=first.pk).text == "Gold at 1000 points."
    request = "How many points does Gold need?"
    (selected,) = select_snippets(decision(), text=request, budget_tokens=1000, today=TODAY)
    assert (selected["text"], selected["version"]) == ("Gold at 1200 points.", 2)
    assert list(current_snippets().values_list("pk", flat=True)) == [revised.pk]
    [change] = snippet_diff(first, revised)
    assert change.field == "text"
    assert [(part.kind, part.text) for part in change.parts] == [
        ("same", "Gold at "), ("del", "1000"), ("ins", "1200"), ("same", " points."),
    ]  # fmt: skip


def test_word_diff_marks_only_the_changed_words_of_a_paragraph():
    old = "Points expire after 12 months.\nGold members keep them for 24 months."
    new = "Points expire after 18 months.\nGold and Platinum members keep them for 24 months."
    parts = word_diff(old, new)
    assert [(p.kind, p.text) for p in parts if p.kind != "same"] == [
        ("del", "12"),
        ("ins", "18"),
        ("ins", " and Platinum"),
    ]
    assert "".join(p.text for p in parts if p.kind != "ins") == old
    assert "".join(p.text for p in parts if p.kind != "del") == new
    assert word_diff("same words", "same words") == (DiffPart("same", "same words"),)


def test_snippet_diff_lists_each_changed_field():
    first = snippet("Tier thresholds", text="Gold at 1000 points.")
    revised = revise_snippet(first, author=None, owner="points@example.com", review_interval_days=30)
    changes = {change.field: [(p.kind, p.text) for p in change.parts] for change in snippet_diff(first, revised)}
    assert changes == {
        "owner": [("del", "team"), ("ins", "points"), ("same", "@example.com")],
        "review_interval_days": [("del", "90"), ("ins", "30")],
    }


def test_revising_an_unknown_field_is_refused():
    with pytest.raises(ValueError):
        revise_snippet(snippet("X"), author=None, domain="web")


def test_staleness_follows_the_date():
    fresh = snippet("Fresh", days_ago=89, interval=90)
    due_today = snippet("Due today", days_ago=90, interval=90)
    overdue = snippet("Overdue", days_ago=91, interval=90)
    assert not fresh.is_stale(TODAY) and not due_today.is_stale(TODAY) and overdue.is_stale(TODAY)
    assert [s.title for s in stale_snippets(TODAY)] == ["Overdue"]
    chosen = select_snippets(decision(), text="Tell me about the rule", budget_tokens=1000, today=TODAY)
    flags = {s["title"]: s["stale"] for s in chosen}
    assert flags == {"Fresh": False, "Due today": False, "Overdue": True}


def test_marking_reviewed_clears_staleness_and_records_the_reviewer():
    overdue = snippet("Overdue", days_ago=200)
    reviewer = make_user()
    mark_reviewed(overdue, user=reviewer, today=TODAY)
    overdue.refresh_from_db()
    assert overdue.last_reviewed == TODAY and overdue.reviewed_by == reviewer
    assert not stale_snippets(TODAY)


def review_state(row: KnowledgeSnippet) -> tuple:
    row.refresh_from_db()
    return row.last_reviewed, row.reviewed_by_id, row.updated_at


def test_undoing_a_review_restores_the_previous_review_state_exactly():
    earlier = make_user("earlier")
    overdue = snippet("Overdue", days_ago=200, reviewed_by=earlier)
    before = review_state(overdue)
    review = mark_reviewed(overdue, user=make_user("now"), today=TODAY)
    assert review_state(overdue) != before
    token = review_token(review)
    assert review_from_token(token, max_age=60) == review  # the form's token stands for the same review
    assert undo_review(review)
    assert review_state(overdue) == before
    assert stale_snippets(TODAY) == [overdue]
    assert not undo_review(review)  # done once: the row is no longer as the review left it


def test_undo_is_refused_once_the_snippet_moved_on():
    reviewed_again = snippet("Reviewed again", days_ago=200)
    first = mark_reviewed(reviewed_again, user=make_user("a"), today=TODAY)
    mark_reviewed(reviewed_again, user=make_user("b"), today=TODAY)
    state = review_state(reviewed_again)
    assert not undo_review(first) and review_state(reviewed_again) == state
    edited = snippet("Edited", days_ago=200)
    review = mark_reviewed(edited, user=make_user("c"), today=TODAY)
    revise_snippet(edited, author=None, text="New text.")
    assert not undo_review(review)  # it reviewed a version that is no longer the newest


def test_a_review_token_cannot_be_altered():
    review = mark_reviewed(snippet("Overdue", days_ago=200), user=make_user(), today=TODAY)
    token = review_token(review)
    with pytest.raises(signing.BadSignature):
        review_from_token(token[:-2] + ("AA" if not token.endswith("AA") else "BB"), max_age=60)


def test_a_turn_flags_stale_knowledge_in_its_routing_log(demo_catalog):
    KnowledgeSnippet.objects.filter(domain__name="general").update(
        last_reviewed=timezone.localdate() - datetime.timedelta(days=400)
    )
    turn = create_turn(Conversation.objects.create(owner=make_user()), "What time is it in Paris?")
    runtime.run_turn(turn.id)
    log = RoutingLog.objects.get(turn=turn)
    assert log.knowledge and all(item["stale"] for item in log.knowledge)


# The demo snippets (demo/data/knowledge.py), the real dense model, requests written for these tests.
POINTS = "Points earning and expiry policy"
ERASURE = "Erasure requests"
MEMBERS = ("loyalty", "members")


def demo_titles(text, action, domains, budget_tokens=1000):
    return [s["title"] for s in select_snippets(decision(action, domains), text=text, budget_tokens=budget_tokens)]


@pytest.fixture
def demo_knowledge(demo_catalog):
    return demo_catalog


def test_a_points_question_gets_the_points_policy_not_the_erasure_runbook(demo_knowledge):
    titles = demo_titles("How many points does M-100 have", "get", MEMBERS)
    assert POINTS in titles and ERASURE not in titles


def test_a_deletion_request_gets_the_erasure_runbook(demo_knowledge):
    titles = demo_titles("Please erase member M-100, they filed a GDPR deletion request", "delete", ("members",))
    assert titles[0] == ERASURE


def test_a_vietnamese_request_gets_the_relevant_snippet(demo_knowledge):
    points = demo_titles("Hội viên M-100 có bao nhiêu điểm?", "get", MEMBERS)
    assert POINTS in points and ERASURE not in points
    deletion = demo_titles("Xóa hội viên M-100 theo yêu cầu xóa dữ liệu cá nhân", "delete", ("members",))
    assert deletion[0] == ERASURE
    expiry = demo_titles("Điểm tích lũy của tôi bao lâu thì hết hạn?", "answer", ("loyalty",))
    assert expiry == [POINTS]


def test_the_request_can_pull_in_a_snippet_of_another_action(demo_knowledge):
    # Routed as a question (answer), but it asks how a deletion is done.
    titles = demo_titles("How do I delete a member who asked to be forgotten?", "answer", ("members",))
    assert titles[0] == ERASURE


def test_with_embeddings_off_selection_falls_back_to_shared_words(demo_knowledge, settings, monkeypatch):
    settings.TOOLHUB_SEARCH_EMBEDDINGS = False

    def no_dense_model(texts, *, model=None):
        raise AssertionError("the dense model is off")

    monkeypatch.setattr(embeddings, "embed_texts", no_dense_model)
    titles = demo_titles("How many points does M-100 have", "get", MEMBERS)
    assert POINTS in titles and ERASURE not in titles
    deletion = demo_titles("Please erase member M-100, they filed a GDPR deletion request", "delete", ("members",))
    assert deletion[0] == ERASURE


def test_the_request_is_embedded_once_beside_the_candidates(counted_embedder):
    snippet("Create rules", action="create", text="Pick a formula type first.")
    snippet("Web rules", domain="web", action="create")
    select_snippets(decision(), text="new rule", budget_tokens=1000, today=TODAY)
    assert counted_embedder == [["new rule", "Create rules: Pick a formula type first."]]
