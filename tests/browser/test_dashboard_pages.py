"""Policies, knowledge review and catalog in a real browser: edit + simulate a policy, clear the stale queue,
a viewer cannot edit (no controls, 403 on direct posts), screenshots at 1280 and 390 px."""

import datetime
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agents.models import RoutingLog
from catalog.models import Domain, KnowledgeSnippet, ToolPolicy
from catalog.policies.decision import RoutingDecision
from tests.browser.conftest import NARROW, SCREENSHOTS, WIDE

TOOL = "dns_lookup"


def stale_snippet(title: str, overdue: int) -> KnowledgeSnippet:
    """Committed (the test is transactional), so Daphne sees it."""
    return KnowledgeSnippet.objects.create(
        domain=Domain.objects.order_by("name").first(), action="answer", title=title, text="Check this.",
        source="browser test", owner="browser@example.com", review_interval_days=30,
        last_reviewed=timezone.localdate() - datetime.timedelta(days=30 + overdue),
    )  # fmt: skip


def csrf_token(page) -> str:
    return page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")


def test_operator_denies_a_tool_after_simulating_and_sees_the_new_version(page, log_in, screenshot):
    policy = ToolPolicy.objects.get(tool__name=TOOL)
    assert policy.status == ToolPolicy.Status.ACTIVE
    for query in ("where does example.com point", "what is 2+2"):
        RoutingLog.objects.create(query=query, decision=RoutingDecision("get", frozenset(), 0.9).as_dict())
    log_in(page, "operator")
    page.goto(f"/policies/{TOOL}/")
    page.get_by_label("Status").select_option("rejected")
    page.get_by_role("button", name="Simulate").click()
    simulation = page.locator("#simulation")
    expect(simulation).to_contain_text("2 of 2 requests would change")
    expect(simulation.locator("table.sim")).to_contain_text(TOOL)
    assert "/simulate" not in page.url  # swapped in place by htmx
    screenshot(page, "policy-simulation-1280")
    page.get_by_label("Note").fill("deny dns_lookup in the browser test")
    page.get_by_role("button", name="Save new version").click()
    expect(page.get_by_role("status")).to_contain_text("Saved version 2")
    newest = page.locator("ol.history li").first
    expect(newest).to_contain_text("v2")
    expect(newest).to_contain_text("active")
    expect(newest).to_contain_text("deny dns_lookup in the browser test")
    expect(newest.locator("td.ins")).to_have_text("denied")  # the status rejected, labelled as it acts
    policy.refresh_from_db()
    assert (policy.status, policy.version) == ("rejected", 2)
    assert policy.versions.get(number=2).author.username == "operator"


def test_marking_a_stale_snippet_reviewed_shrinks_the_queue(page, log_in):
    stale_snippet("Browser test: most overdue", overdue=400)
    log_in(page, "operator")
    page.goto("/knowledge/")
    rows = page.locator("#snippet-table tbody tr")
    before = rows.count()
    assert before >= 1
    expect(page.locator("#queue-count")).to_have_text(str(before))
    first = rows.first
    expect(first).to_contain_text("Browser test: most overdue")  # most days overdue first
    first.get_by_role("button", name="Mark reviewed").click()
    expect(rows).to_have_count(before - 1)
    expect(page.locator("#queue-count")).to_have_text(str(before - 1))
    expect(page.locator("#snippet-table")).not_to_contain_text("Browser test: most overdue")
    assert page.url.endswith("/knowledge/")  # no navigation: htmx removed the row
    page.reload()
    expect(rows).to_have_count(before - 1)


def test_bulk_review_and_reassign_by_keyboard_alone(page, log_in, screenshot):
    late = [stale_snippet(f"Browser test: bulk {n}", overdue=500 + n) for n in range(3)]
    log_in(page, "operator")
    page.goto("/knowledge/")
    rows = page.locator("#snippet-table tbody tr")
    count = rows.count()
    # Space ticks the two most overdue rows' boxes; Tab reaches the bulk buttons above the table.
    for snippet in late[2:0:-1]:
        page.get_by_role("checkbox", name=f"Choose {snippet.title}").focus()
        page.keyboard.press("Space")
    page.get_by_role("button", name="Mark chosen reviewed").focus()
    page.keyboard.press("Enter")
    status = page.locator("#review-feedback")
    expect(status).to_contain_text("2 snippets marked reviewed.")
    expect(rows).to_have_count(count - 2)
    assert page.url.endswith("/knowledge/")  # htmx swapped the queue in place

    # Choose every listed row with the header's box, then reassign them all to a user picked by typing.
    page.get_by_role("checkbox", name="Choose every snippet listed").focus()
    page.keyboard.press("Space")
    page.get_by_label("New owner").focus()
    page.keyboard.type("viewer")
    page.get_by_role("button", name="Reassign chosen").focus()
    page.keyboard.press("Enter")
    expect(status).to_contain_text("reassigned to viewer, who is asked to review them.")
    expect(page.locator(f"#snippet-{late[0].key}")).to_contain_text("asked to review")  # still queued: not a review
    screenshot(page, "knowledge-bulk-1280")
    assert KnowledgeSnippet.objects.filter(key=late[0].key, owner="viewer", review_requested=True).exists()


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280", "390"])
def test_mark_reviewed_says_so_and_undo_puts_the_row_back_by_keyboard(new_page, log_in, screenshot, viewport):
    late = stale_snippet("Browser test: undo me", overdue=400)
    before = (late.last_reviewed, late.reviewed_by_id, late.updated_at)
    page = new_page(viewport=viewport)
    log_in(page, "operator")
    page.goto("/knowledge/")
    rows = page.locator("#snippet-table tbody tr")
    count = rows.count()
    status = page.locator("#review-feedback")  # in the page before anything is announced
    expect(status).to_have_attribute("role", "status")
    expect(status).to_have_attribute("aria-live", "polite")
    named = re.compile(r"^Mark reviewed\s*: Browser test: undo me$")  # the row's title is in the button's name
    mark = rows.first.get_by_role("button", name=named)
    mark.focus()
    page.keyboard.press("Enter")
    expect(status).to_contain_text("“Browser test: undo me” marked reviewed.")
    expect(rows).to_have_count(count - 1)
    undo = status.get_by_role("button", name="Undo")
    expect(undo).to_be_focused()  # the button pressed is gone: focus goes to what can take it back
    assert no_sideways_scroll(page)
    screenshot(page, f"knowledge-reviewed-{viewport['width']}")
    page.keyboard.press("Enter")
    expect(status).to_contain_text("Review of “Browser test: undo me” undone.")
    expect(rows).to_have_count(count)
    expect(page.locator("#queue-count")).to_have_text(str(count))
    expect(rows.first).to_contain_text("Browser test: undo me")
    expect(rows.first.get_by_role("button", name=named)).to_be_focused()
    assert page.url.endswith("/knowledge/")  # no navigation: htmx swapped the queue back
    late.refresh_from_db()
    assert (late.last_reviewed, late.reviewed_by_id, late.updated_at) == before
    page.reload()
    expect(rows.first).to_contain_text("Browser test: undo me")


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280", "390"])
def test_simulating_a_confirmation_lists_the_calls_that_would_wait_for_approval(new_page, log_in, screenshot, viewport):
    policy = ToolPolicy.objects.get(tool__name=TOOL)
    assert not policy.requires_confirmation
    decision = RoutingDecision("get", frozenset(), 0.9).as_dict()
    RoutingLog.objects.create(query="where does example.com point", decision=decision, called=[TOOL])
    RoutingLog.objects.create(query="what is 2+2", decision=decision, called=["calculator"])
    page = new_page(viewport=viewport)
    log_in(page, "operator")
    page.goto(f"/policies/{TOOL}/")
    page.get_by_label("Requires confirmation").check()
    page.get_by_role("button", name="Simulate").focus()
    page.keyboard.press("Enter")
    simulation = page.locator("#simulation")
    expect(simulation.locator(".sim-summary")).to_contain_text("1 of 2 requests would change")
    counts = simulation.locator("dl.sim-counts")
    expect(counts.locator("div", has_text="Calls that would wait for approval")).to_contain_text("1")
    expect(counts.locator("div", has_text="Tools added")).to_contain_text("0")
    changed = simulation.locator("table.sim tr.changed")
    expect(changed).to_have_count(1)
    expect(changed).to_contain_text("where does example.com point")
    expect(changed).to_contain_text(f"{TOOL}: runs → needs approval")
    assert "/simulate" not in page.url and no_sideways_scroll(page)
    screenshot(page, f"policy-simulation-confirmation-{viewport['width']}")
    policy.refresh_from_db()
    assert not policy.requires_confirmation and policy.version == 1  # simulating saved nothing


def test_guarding_the_balance_names_the_reads_that_still_return_it(page, log_in):
    """The demo's get_member_balance behind approval: the simulation names the Loyalty reads that return the balance
    anyway (catalog/policies/sidestep.py), each linked to its own policy."""
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, "operator")
    page.goto("/policies/get_member_balance/")
    page.get_by_label("Requires confirmation").check()
    page.get_by_role("button", name="Simulate").click()
    warning = page.locator("#simulation .sidesteps")
    expect(warning).to_contain_text("puts get_member_balance behind approval")
    expect(warning.get_by_role("link", name="get_points_ledger")).to_have_attribute(
        "href", "/policies/get_points_ledger/"
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    warning.screenshot(path=str(SCREENSHOTS / "policy-sidestep-1280.png"))  # the warning itself, for the docs
    assert not ToolPolicy.objects.get(tool__name="get_member_balance").requires_confirmation  # simulating saved nothing


def test_viewer_sees_no_edit_controls_and_direct_posts_get_403(page, log_in, browser_stack):
    snippet = stale_snippet("Browser test: viewer", overdue=10)
    log_in(page, "viewer")
    page.goto(f"/policies/{TOOL}/")
    expect(page.get_by_role("heading", name=f"Policy of {TOOL}")).to_be_visible()
    expect(page.locator("ol.history")).to_contain_text("v1")
    for name in ("Save new version", "Simulate"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("roll back"))).to_have_count(0)
    page.goto("/knowledge/")
    expect(page.get_by_text("Browser test: viewer")).to_be_visible()
    expect(page.get_by_role("button", name="Mark reviewed")).to_have_count(0)
    token = csrf_token(page)
    writes = {
        f"/policies/{TOOL}/": {"status": "rejected", "operation": "read", "risk": "low", "note": "x",
                               "base_version": "1"},
        f"/policies/{TOOL}/simulate": {"status": "rejected", "operation": "read", "risk": "low", "base_version": "1"},
        f"/policies/{TOOL}/rollback/1/": {},
        f"/knowledge/{snippet.key}/": {"title": "Hacked", "text": "x", "source": "x", "owner": "x",
                                       "action": "answer", "review_interval_days": "30"},
        f"/knowledge/{snippet.key}/review": {},
    }  # fmt: skip
    for url, form in writes.items():
        response = page.request.post(url, form=form, headers={"X-CSRFToken": token, "HX-Request": "true"})
        assert response.status == 403, url
        assert "<title>Not allowed · toolhub</title>" in response.text(), url  # for the permission, not the token
    snippet.refresh_from_db()
    assert snippet.reviewed_by is None and KnowledgeSnippet.objects.filter(key=snippet.key).count() == 1
    assert ToolPolicy.objects.get(tool__name=TOOL).version == 1


def test_an_operator_posting_the_same_way_is_accepted(page, log_in):
    """The control for the test above: the token and form are right, only the permission differs."""
    snippet = stale_snippet("Browser test: operator post", overdue=10)
    log_in(page, "operator")
    page.goto("/knowledge/")
    response = page.request.post(
        f"/knowledge/{snippet.key}/review", headers={"X-CSRFToken": csrf_token(page), "HX-Request": "true"}
    )
    assert response.status == 200
    snippet.refresh_from_db()
    assert snippet.reviewed_by.username == "operator"


def test_refused_and_missing_pages_are_toolhubs_own_and_the_favicon_loads(page, log_in):
    log_in(page, "viewer")
    refused = page.goto(f"/policies/{TOOL}/rollback/1/")
    assert refused.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    missing = page.goto("/no-such-page/")
    assert missing.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(icon).status == 200
    favicon = page.request.get("/favicon.ico")  # followed to the icon
    assert (favicon.status, favicon.headers["content-type"]) == (200, "image/svg+xml")


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280", "390"])
def test_screenshots_of_the_policy_knowledge_and_catalog_pages(new_page, log_in, screenshot, viewport):
    stale_snippet("Browser test: screenshot", overdue=12)
    page = new_page(viewport=viewport)
    log_in(page, "operator")
    width = viewport["width"]
    for path, name, heading in (
        ("/policies/", "policies", "Policies"),
        (f"/policies/{TOOL}/", "policy", f"Policy of {TOOL}"),
        ("/knowledge/", "knowledge", "Knowledge review"),
        ("/catalog/", "catalog", "Catalog"),
    ):
        page.goto(path)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{path} scrolls sideways at {width} px"
        assert screenshot(page, f"{name}-{width}").stat().st_size > 0


def test_catalog_filters_swap_the_table_and_keep_the_filters_in_the_address(page, log_in):
    log_in(page, "viewer")
    page.goto("/catalog/")
    rows = page.locator("#tool-table tbody tr")
    everything = rows.count()
    page.get_by_label("Source").select_option("builtin")
    page.wait_for_url("**/catalog/?*source=builtin*")
    expect(rows.first).to_contain_text("builtin")
    builtin = rows.count()
    assert 0 < builtin < everything
    assert all(text == "builtin" for text in rows.locator("td:nth-child(2)").all_inner_texts())
    page.reload()  # the deep link gives the same table
    expect(rows).to_have_count(builtin)
    expect(page.get_by_label("Source")).to_have_value("builtin")
