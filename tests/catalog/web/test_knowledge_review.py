"""Knowledge review pages: the stale queue (most overdue first), filters, mark reviewed, edit -> version + diff, CSV."""

import csv
import datetime
import io
import re

import pytest
from django.utils import timezone

from catalog.models import Domain, KnowledgeSnippet
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


def snippet(title, *, overdue, domain="loyalty", owner="team@example.com", interval=30, text="A rule."):
    """A snippet whose review is `overdue` days late (negative: due in that many days)."""
    domain_row, _ = Domain.objects.get_or_create(name=domain, defaults={"title": domain})
    reviewed = timezone.localdate() - datetime.timedelta(days=interval + overdue)
    return KnowledgeSnippet.objects.create(
        domain=domain_row, action="answer", title=title, text=text, source="handbook", owner=owner,
        last_reviewed=reviewed, review_interval_days=interval,
    )  # fmt: skip


def table(page: str) -> str:
    return page.split('id="snippet-table"')[1].split("</table>")[0]


@pytest.fixture
def operator_client(client):
    client.force_login(make_user("op", role="operator"))
    return client


def test_stale_queue_lists_only_stale_snippets_most_overdue_first(operator_client):
    snippet("A little late", overdue=2)
    snippet("Very late", overdue=40)
    snippet("Fresh", overdue=-10)
    snippet("Late", overdue=9)
    rows = table(operator_client.get("/knowledge/").content.decode())
    assert "Fresh" not in rows
    positions = [rows.index(title) for title in ("Very late", "Late<", "A little late")]
    assert positions == sorted(positions)
    assert '<span id="queue-count">3</span>' in rows
    for days in (">40<", ">9<", ">2<"):
        assert days in rows


def test_all_view_and_owner_and_domain_filters_are_deep_links(operator_client):
    snippet("Loyalty late", overdue=5, owner="ana")
    snippet("Shop late", overdue=5, domain="shop", owner="bo")
    snippet("Shop fresh", overdue=-3, domain="shop", owner="bo")
    everything = table(operator_client.get("/knowledge/", {"show": "all"}).content.decode())
    assert all(t in everything for t in ("Loyalty late", "Shop late", "Shop fresh")) and "due in 3" in everything
    by_owner = table(operator_client.get("/knowledge/", {"owner": "bo"}).content.decode())
    assert "Shop late" in by_owner and "Loyalty late" not in by_owner and "Shop fresh" not in by_owner
    by_domain = table(operator_client.get("/knowledge/", {"domain": "loyalty", "show": "all"}).content.decode())
    assert "Loyalty late" in by_domain and "Shop" not in by_domain


def test_mark_reviewed_over_htmx_removes_the_row_and_updates_the_count(operator_client):
    late = snippet("Very late", overdue=40)
    snippet("Late", overdue=9)
    response = operator_client.post(f"/knowledge/{late.key}/review", headers={"HX-Request": "true"})
    assert response.status_code == 200
    body = response.content.decode()
    assert "<tr" not in body and '<span id="queue-count" hx-swap-oob="true">1</span>' in body
    late.refresh_from_db()
    assert (late.last_reviewed, late.reviewed_by.username) == (timezone.localdate(), "op")
    rows = table(operator_client.get("/knowledge/").content.decode())
    assert "Very late" not in rows and "Late" in rows


def feedback(page: str) -> str:
    """The feedback region's content (the whole region on a page, the out-of-band part of an htmx answer)."""
    return page.split('id="review-feedback"')[1].split("</div>")[0]


def review_state(row: KnowledgeSnippet) -> tuple:
    row.refresh_from_db()
    return row.last_reviewed, row.reviewed_by_id, row.updated_at


def undo_form(page: str) -> tuple[str, dict]:
    """The Undo form's action and fields, as the browser would post them."""
    region = feedback(page)
    action = re.search(r'<form method="post" action="([^"]+)"', region).group(1).replace("&amp;", "&")
    token = re.search(r'name="review" value="([^"]+)"', region).group(1)
    return action, {"review": token}


def test_the_knowledge_page_has_a_status_region_for_the_reviews_feedback(operator_client):
    page = operator_client.get("/knowledge/").content.decode()
    assert '<div id="review-feedback" class="flash review-feedback" role="status" aria-live="polite">' in page
    assert "Undo" not in feedback(page)


def test_mark_reviewed_over_htmx_says_so_and_undo_puts_the_row_back_exactly(operator_client):
    late = snippet("Very late", overdue=40)
    snippet("Late", overdue=9)
    before = review_state(late)
    body = operator_client.post(f"/knowledge/{late.key}/review?owner=team%40example.com",
                                headers={"HX-Request": "true"}).content.decode()  # fmt: skip
    assert '<div id="review-feedback" hx-swap-oob="innerHTML">' in body
    assert "“Very late” marked reviewed." in feedback(body)
    assert '<button type="submit" class="small" autofocus>Undo</button>' in feedback(body)
    action, form = undo_form(body)
    assert action == f"/knowledge/{late.key}/review/undo?owner=team%40example.com"  # the filters are kept
    response = operator_client.post(action, form, headers={"HX-Request": "true"})
    assert response.status_code == 200
    undone = response.content.decode()
    assert undone.lstrip().startswith('<div id="snippet-table"')  # the queue as it is now, the row back in it
    assert [t in table(undone) for t in ("Very late", "Late")] == [True, True]
    assert '<span id="queue-count">2</span>' in undone
    assert re.search(r'autofocus>Mark reviewed<span class="visually-hidden">: Very late', undone)
    assert "Review of “Very late” undone." in feedback(undone) and "Undo</button>" not in feedback(undone)
    assert review_state(late) == before


def test_mark_reviewed_and_undo_without_htmx(operator_client):
    late = snippet("Very late", overdue=40)
    before = review_state(late)
    response = operator_client.post(f"/knowledge/{late.key}/review")
    assert (response.status_code, response.url) == (302, "/knowledge/?")
    page = operator_client.get(response.url).content.decode()
    assert "“Very late” marked reviewed." in feedback(page) and "Very late" not in table(page)
    assert "“Very late” marked reviewed." not in operator_client.get("/knowledge/").content.decode()  # shown once
    action, form = undo_form(page)
    response = operator_client.post(action, form)
    assert response.status_code == 302
    page = operator_client.get(response.url).content.decode()
    assert "Review of “Very late” undone." in page and "Very late" in table(page)
    assert review_state(late) == before


def test_an_undo_that_comes_too_late_is_409_and_changes_nothing(operator_client):
    late = snippet("Very late", overdue=40)
    first = operator_client.post(f"/knowledge/{late.key}/review", headers={"HX-Request": "true"}).content.decode()
    operator_client.post(f"/knowledge/{late.key}/review", headers={"HX-Request": "true"})  # reviewed again since
    state = review_state(late)
    action, form = undo_form(first)
    response = operator_client.post(action, form, headers={"HX-Request": "true"})
    assert response.status_code == 409
    assert "reviewed or edited again since; nothing was undone" in feedback(response.content.decode())
    plain = operator_client.post(action, form)
    assert plain.status_code == 409 and "nothing was undone" in plain.content.decode()
    assert review_state(late) == state


def test_a_forged_undo_is_400_and_another_operators_is_403(operator_client, client):
    late = snippet("Very late", overdue=40, interval=30)
    body = operator_client.post(f"/knowledge/{late.key}/review", headers={"HX-Request": "true"}).content.decode()
    state = review_state(late)
    action, form = undo_form(body)
    forged = operator_client.post(action, {"review": form["review"].replace(":", ":x", 1)})
    assert forged.status_code == 400 and "expired or is not valid" in forged.content.decode()
    assert operator_client.post(action, {}).status_code == 400
    assert operator_client.post("/knowledge/other-key/review/undo", form).status_code == 404
    operator_client.force_login(make_user("other-op", role="operator"))
    assert operator_client.post(action, form).status_code == 403
    client.force_login(make_user("watcher", role="viewer"))
    assert client.post(action, form).status_code == 403
    assert client.get(action).status_code == 403
    assert review_state(late) == state


def test_mark_reviewed_in_the_all_view_returns_the_updated_row(operator_client):
    late = snippet("Very late", overdue=40)
    response = operator_client.post(f"/knowledge/{late.key}/review?show=all", headers={"HX-Request": "true"})
    body = response.content.decode()
    assert f'<tr id="snippet-{late.key}"' in body and "due in 30" in body and "by op" in body


def test_mark_reviewed_without_htmx_redirects_back_keeping_filters(operator_client):
    late = snippet("Very late", overdue=40)
    response = operator_client.post(f"/knowledge/{late.key}/review?owner=team%40example.com")
    assert response.status_code == 302 and response.url == "/knowledge/?owner=team%40example.com"
    assert operator_client.post("/knowledge/missing/review").status_code == 404


def test_editing_makes_a_new_version_and_shows_the_diff(operator_client):
    old = snippet("Points expire", overdue=3, text="Points expire after 12 months.")
    data = {"title": old.title, "text": "Points expire after 24 months.", "source": old.source, "owner": old.owner,
            "action": old.action, "review_interval_days": old.review_interval_days}  # fmt: skip
    response = operator_client.post(f"/knowledge/{old.key}/", data)
    assert response.status_code == 302
    versions = list(KnowledgeSnippet.objects.filter(key=old.key).order_by("version"))
    assert [(v.version, v.text) for v in versions] == [
        (1, "Points expire after 12 months."),
        (2, "Points expire after 24 months."),
    ]
    assert versions[1].author.username == "op"
    page = operator_client.get(f"/knowledge/{old.key}/").content.decode()
    diff = page.split('<dl class="word-diff">')[1].split("</dl>")[0]
    hidden = '<span class="visually-hidden">'
    assert f"<dd>Points expire after <del>{hidden}[removed: </span>12{hidden}]</span></del>" in diff
    assert f"<ins>{hidden}[added: </span>24{hidden}]</span></ins> months.</dd>" in diff
    assert "<dt>Text</dt>" in diff and "Title" not in diff  # only what changed
    assert "Saved version 2" in page


def test_edit_errors_show_next_to_the_field_and_nothing_is_saved(operator_client):
    old = snippet("Points expire", overdue=3)
    data = {"title": "", "text": old.text, "source": old.source, "owner": old.owner, "action": "fly",
            "review_interval_days": 30}  # fmt: skip
    page = operator_client.post(f"/knowledge/{old.key}/", data).content.decode()
    title = page.split('field-title">')[1].split('<div class="field')[0]
    action = page.split('field-action">')[1].split('<div class="field')[0]
    assert "This field is required." in title and "Select a valid choice" in action
    unchanged = data | {"title": old.title, "action": old.action}
    assert "Nothing changed" in operator_client.post(f"/knowledge/{old.key}/", unchanged).content.decode()
    assert KnowledgeSnippet.objects.filter(key=old.key).count() == 1


def csv_rows(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_csv_export_streams_the_filtered_queue(operator_client):
    snippet("Very late", overdue=40, owner="ana")
    snippet("Late", overdue=9, owner="bo")
    snippet("Fresh", overdue=-5, owner="ana")
    response = operator_client.get("/knowledge/export.csv", {"owner": "ana", "show": "all"})
    assert response.streaming and response["Content-Type"] == "text/csv"
    rows = csv_rows(response)
    assert [(r["title"], r["owner"], r["days_overdue"], r["stale"]) for r in rows] == [
        ("Very late", "ana", "40", "yes"),
        ("Fresh", "ana", "-5", "no"),
    ]
    assert [r["title"] for r in csv_rows(operator_client.get("/knowledge/export.csv"))] == ["Very late", "Late"]


def test_csv_export_carries_the_text_owner_domain_version_and_review_dates(operator_client):
    late = snippet(
        "Points expire", overdue=10, domain="shop", owner="ana", text='Points expire\nafter 12 months, "net".'
    )
    [row] = csv_rows(operator_client.get("/knowledge/export.csv"))
    assert row == row | {
        "text": late.text, "owner": "ana", "domain": "shop", "version": "1",
        "last_reviewed": late.last_reviewed.isoformat(), "review_due": late.review_due.isoformat(),
        "review_interval_days": "30",
    }  # fmt: skip


def test_csv_export_writes_text_that_could_start_a_formula_safely(operator_client):
    snippet('=HYPERLINK("http://x")', overdue=3, owner="@team", text="-2 points a day")
    snippet("+1 bonus", overdue=2, text="\tindented")
    rows = csv_rows(operator_client.get("/knowledge/export.csv"))
    assert [(r["title"], r["owner"], r["text"]) for r in rows] == [
        ('\'=HYPERLINK("http://x")', "'@team", "'-2 points a day"),
        ("'+1 bonus", "team@example.com", "'\tindented"),
    ]
    assert [r["days_overdue"] for r in rows] == ["3", "2"]
    fresh = snippet("Fresh", overdue=-5)
    everything = csv_rows(operator_client.get("/knowledge/export.csv", {"show": "all"}))
    [row] = [r for r in everything if r["key"] == fresh.key]
    assert row["days_overdue"] == "-5"  # a number, not text: left as it is


def test_viewer_reads_the_queue_without_edit_controls(client):
    late = snippet("Very late", overdue=40)
    client.force_login(make_user("watcher", role="viewer"))
    page = client.get("/knowledge/").content.decode()
    assert "Very late" in page and "Mark reviewed" not in page
    detail = client.get(f"/knowledge/{late.key}/").content.decode()
    assert "Mark reviewed" not in detail and "Save new version" not in detail
