"""Knowledge for a working day: a reassignment asks the new owner to review (not a review itself), bulk mark
reviewed and reassign (all or none), owners picked from users, and a "due soon" view."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.knowledge.registry import (
    BULK_LIMIT,
    UnknownSnippets,
    current_snippets,
    mark_all_reviewed,
    mark_reviewed,
    reassign_all,
    review_from_token,
    review_token,
    revise_snippet,
    undo_review,
)
from catalog.knowledge.selectors import DUE_SOON_DAYS, snippets_for_review
from catalog.models import Domain, KnowledgeSnippet
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
TODAY = timezone.localdate()


def snippet(title, *, overdue, owner="team@example.com", interval=30) -> KnowledgeSnippet:
    """A snippet whose review is `overdue` days late (negative: due in that many days)."""
    domain, _ = Domain.objects.get_or_create(name="loyalty", defaults={"title": "Loyalty"})
    return KnowledgeSnippet.objects.create(
        domain=domain, action="answer", title=title, text="A rule.", source="handbook", owner=owner,
        last_reviewed=TODAY - datetime.timedelta(days=interval + overdue), review_interval_days=interval,
    )  # fmt: skip


def current(key: str) -> KnowledgeSnippet:
    return current_snippets().get(key=key)


@pytest.fixture
def operator(client):
    user = make_user("op", role="operator")
    client.force_login(user)
    return user


def test_a_new_owner_is_asked_to_review_and_the_reassignment_is_not_a_review(operator):
    fresh = snippet("Points expiry", overdue=-20)
    moved = revise_snippet(fresh, author=operator, owner="bo")
    assert moved.review_requested and moved.version == 2
    assert (moved.last_reviewed, moved.reviewed_by) == (fresh.last_reviewed, None)  # the old review stands
    assert [s.key for s in snippets_for_review()] == [fresh.key]  # in the queue, though not stale
    edited = revise_snippet(moved, author=operator, text="A clearer rule.")  # someone else's edit: still asked
    assert edited.review_requested and edited.last_reviewed == TODAY
    review = mark_reviewed(edited, user=make_user("bo"))
    assert not current(fresh.key).review_requested and snippets_for_review() == []
    assert undo_review(review_from_token(review_token(review), max_age=60))  # undo puts the request back too
    assert current(fresh.key).review_requested


def test_an_edit_by_its_new_owner_counts_as_their_review(operator):
    moved = revise_snippet(snippet("Tier rules", overdue=-20), author=operator, owner="bo")
    by_owner = revise_snippet(moved, author=make_user("bo"), text="Tiers, checked.")
    assert not by_owner.review_requested and by_owner.last_reviewed == TODAY


def test_due_soon_lists_what_falls_due_within_the_window_and_nothing_queued(operator):
    snippet("Stale", overdue=3)
    snippet("Due in 2", overdue=-2)
    snippet(f"Due in {DUE_SOON_DAYS}", overdue=-DUE_SOON_DAYS)
    snippet("Due much later", overdue=-(DUE_SOON_DAYS + 1))
    asked = revise_snippet(snippet("Asked", overdue=-1), author=operator, owner="bo")
    assert [s.title for s in snippets_for_review(show="soon")] == ["Due in 2", f"Due in {DUE_SOON_DAYS}"]
    assert {s.title for s in snippets_for_review()} == {"Stale", asked.title}


def test_bulk_mark_reviewed_changes_every_chosen_snippet_and_the_queue_shows_it(client, operator):
    late = [snippet(f"Late {n}", overdue=n + 1) for n in range(3)]
    response = client.post("/knowledge/bulk", {"keys": [s.key for s in late[:2]], "action": "review"})
    assert response.status_code == 302
    assert [current(s.key).last_reviewed == TODAY for s in late] == [True, True, False]
    page = client.get("/knowledge/").content.decode()
    assert "2 snippets marked reviewed." in page and '<span id="queue-count">1</span>' in page


def test_bulk_reassign_asks_each_new_owner_and_skips_what_they_already_own(client, operator):
    ours = snippet("Ours", overdue=-30, owner="bo")
    theirs = snippet("Theirs", overdue=-30, owner="ana")
    response = client.post("/knowledge/bulk", {"keys": [ours.key, theirs.key], "action": "reassign", "owner": "bo"},
                           HTTP_HX_REQUEST="true")  # fmt: skip
    assert response.status_code == 200 and "1 snippet reassigned to bo, who is asked to review them." in (
        response.content.decode()
    )
    assert current(ours.key).version == 1 and current(theirs.key).review_requested and current(theirs.key).owner == "bo"


@pytest.mark.parametrize(
    "data,error",
    [
        ({"action": "review"}, "Choose at least one snippet."),
        ({"keys": ["a-late-one", "no-such-snippet"], "action": "review"}, "Select a valid choice."),
        ({"keys": ["a-late-one"], "action": "reassign", "owner": ""}, "Reassigning needs the new owner."),
        ({"keys": ["a-late-one"], "action": "reassign", "owner": "bo\x1b"}, "without control characters"),
        ({"keys": ["a-late-one"], "action": "reassign", "owner": "bo\x00"}, "Null characters are not allowed."),
        ({"keys": ["a-late-one"], "action": "reassign", "owner": "x" * 201}, "at most 200 characters"),
        ({"keys": ["a-late-one"], "action": "delete"}, "Select a valid choice."),
    ],
)
def test_bad_bulk_input_is_a_400_that_changes_nothing(client, operator, data, error):
    late = snippet("A late one", overdue=5)
    response = client.post("/knowledge/bulk", data)
    assert response.status_code == 400 and error in response.content.decode()
    assert current(late.key).last_reviewed != TODAY and current(late.key).version == 1


def test_a_bulk_action_on_a_thousand_snippets_is_whole_or_nothing(operator, monkeypatch):
    domain, _ = Domain.objects.get_or_create(name="loyalty", defaults={"title": "Loyalty"})
    KnowledgeSnippet.objects.bulk_create(
        KnowledgeSnippet(key=f"rule-{n:04}", domain=domain, action="answer", title=f"Rule {n}", text="A rule.",
                         source="handbook", owner="ana", last_reviewed=TODAY, review_interval_days=90)
        for n in range(BULK_LIMIT)
    )  # fmt: skip
    keys = [f"rule-{n:04}" for n in range(BULK_LIMIT)]
    with pytest.raises(UnknownSnippets):
        reassign_all([*keys[:-1], "gone"], owner="bo", author=operator)
    with pytest.raises(ValueError, match="At most 1000"):
        reassign_all([*keys, "one-more"], owner="bo", author=operator)
    reviewed = []

    def failing_at_the_last(snippet, **kwargs):
        reviewed.append(snippet.key)
        if len(reviewed) == BULK_LIMIT:
            raise RuntimeError("the database went away")
        return real_mark(snippet, **kwargs)

    real_mark = mark_reviewed
    monkeypatch.setattr("catalog.knowledge.registry.mark_reviewed", failing_at_the_last)
    with pytest.raises(RuntimeError):
        mark_all_reviewed(keys, user=operator)
    assert len(reviewed) == BULK_LIMIT and not KnowledgeSnippet.objects.filter(reviewed_by=operator).exists()
    assert KnowledgeSnippet.objects.count() == BULK_LIMIT and not KnowledgeSnippet.objects.filter(owner="bo").exists()
    with CaptureQueriesContext(connection) as queries:
        assert len(reassign_all(keys, owner="bo", author=operator)) == BULK_LIMIT
    assert len(queries) < 30  # one read and batched inserts (SQLite caps a statement's values), none a snippet
    assert current_snippets().filter(owner="bo", review_requested=True, version=2).count() == BULK_LIMIT


def test_the_pages_offer_users_and_owners_as_owner_choices_and_viewers_get_no_bulk(client, operator):
    make_user("carol", role="viewer")
    late = snippet("Late", overdue=4, owner="Loyalty team")
    page = client.get("/knowledge/").content.decode()
    choices = page.split('<datalist id="owner-choices">')[1].split("</datalist>")[0]
    assert all(f'<option value="{name}">' in choices for name in ("carol", "op", "Loyalty team"))
    assert f'name="keys" value="{late.key}" form="bulk-form"' in page and 'data-choose-all="bulk-form"' in page
    detail = client.get(f"/knowledge/{late.key}/").content.decode()
    assert 'list="owner-choices"' in detail and '<option value="carol">' in detail
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/knowledge/").content.decode()
    assert 'id="bulk-form"' not in page and 'name="keys"' not in page
    assert client.post("/knowledge/bulk", {"keys": [late.key], "action": "review"}).status_code == 403


def test_html_in_an_owner_is_stored_and_shown_inert(client, operator):
    late = snippet("Late", overdue=4)
    owner = '<img src=x onerror="alert(1)">'
    assert client.post("/knowledge/bulk", {"keys": [late.key], "action": "reassign", "owner": owner}).status_code == 302
    page = client.get("/knowledge/").content.decode()
    assert owner not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
