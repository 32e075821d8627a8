"""Knowledge review pages: the stale queue (most overdue first), filters, mark reviewed, edit -> version + diff, CSV."""

import csv
import datetime
import io

import pytest
from django.utils import timezone

from catalog.models import Domain, KnowledgeSnippet
from tests.builders import make_user

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
    assert '<span class="del">-Points expire after 12 months.</span>' in page
    assert '<span class="ins">+Points expire after 24 months.</span>' in page
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


def test_csv_export_streams_the_filtered_queue(operator_client):
    snippet("Very late", overdue=40, owner="ana")
    snippet("Late", overdue=9, owner="bo")
    snippet("Fresh", overdue=-5, owner="ana")
    response = operator_client.get("/knowledge/export.csv", {"owner": "ana", "show": "all"})
    assert response.streaming and response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:3] == ["key", "version", "title"]
    assert [(r[2], r[5], r[9], r[10]) for r in rows[1:]] == [
        ("Very late", "ana", "40", "yes"),
        ("Fresh", "ana", "-5", "no"),
    ]
    stale = operator_client.get("/knowledge/export.csv")
    assert [r[2] for r in csv.reader(io.StringIO(b"".join(stale.streaming_content).decode()))][1:] == [
        "Very late",
        "Late",
    ]


def test_viewer_reads_the_queue_without_edit_controls(client):
    late = snippet("Very late", overdue=40)
    client.force_login(make_user("watcher", role="viewer"))
    page = client.get("/knowledge/").content.decode()
    assert "Very late" in page and "Mark reviewed" not in page
    detail = client.get(f"/knowledge/{late.key}/").content.decode()
    assert "Mark reviewed" not in detail and "Save new version" not in detail
