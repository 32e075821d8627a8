"""The policy review queue in a real browser: an operator accepts a sync's proposals in bulk with the keyboard
alone; high-risk ones wait for a second operator; the page has no serious or critical axe violation at 1440 and
390 px. Saves test-artifacts/screenshots/policy-review-1440.png (docs/screenshots/ holds a copy)."""

from playwright.sync_api import expect

from catalog.models import McpServer, PolicyChangeRequest, Tool, ToolPolicy
from catalog.policies.selectors import tools_needing_policy
from tests.browser.conftest import NARROW, PASSWORD, SCREENSHOTS
from tests.browser.test_accessibility import DESCRIBE_FOCUS, report, violations_of

URL = "/policies/-/review/"
WIDEST = {"width": 1440, "height": 1000}
MEMBER_SCHEMA = {"type": "object", "properties": {"member_id": {"type": "string"}, "badge": {"type": "string"}},
                 "required": ["member_id"]}  # fmt: skip
# What a sync of the Loyalty server would bring if it started serving badges (new tools have no policy).
NEW_TOOLS = {
    "get_member_badges": ("The badges a loyalty member has earned.", {"readOnlyHint": True}),
    "award_member_badge": ("Award a badge to a loyalty member.", {"readOnlyHint": False, "destructiveHint": False}),
    "update_member_badge": ("Change the label of a member's badge.", {"readOnlyHint": False, "idempotentHint": True,
                                                                      "destructiveHint": False}),
    "revoke_member_badge": ("Take a badge away from a loyalty member.", {"destructiveHint": True}),
}  # fmt: skip


def new_badge_tools() -> None:
    for name, (description, annotations) in NEW_TOOLS.items():
        Tool.objects.create(name=name, upstream_name=name, description=description, input_schema=MEMBER_SCHEMA,
                            annotations=annotations, source="mcp", is_mcp=True, should_defer=True)  # fmt: skip
    server = McpServer.objects.get(name="loyalty")
    server.tool_names = sorted([*server.tool_names, *NEW_TOOLS])
    server.save(update_fields=["tool_names"])


def tab_to(page, name: str, limit: int = 80) -> None:
    """Press Tab until the focused control's name starts with `name`."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(DESCRIBE_FOCUS)
        if focused and focused["name"].startswith(name):
            return
    raise AssertionError(f"Tab never reached {name!r}")


def log_in_by_keyboard(page, username: str) -> None:
    page.goto("/login/")
    tab_to(page, "Username")
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: "/login/" not in url)


def test_an_operator_accepts_a_syncs_proposals_in_bulk_with_the_keyboard_alone(new_page):
    new_badge_tools()
    page = new_page(WIDEST)
    log_in_by_keyboard(page, "operator")
    page.goto("/policies/")
    tab_to(page, "Skip to content")
    page.keyboard.press("Enter")
    tab_to(page, f"{tools_needing_policy().count()} tools await review")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{URL}")
    queue = ToolPolicy.objects.count()
    badges = page.locator("#review-get_member_badges")
    expect(badges).to_contain_text("readOnlyHint: true")
    expect(badges).to_contain_text("nearest reviewed tools:")
    expect(badges.get_by_label("Domains of get_member_badges, comma-separated")).to_have_value("loyalty, members")
    expect(page.locator("#review-revoke_member_badge")).to_contain_text("Accepting asks a second operator")

    tab_to(page, "Skip to content")
    page.keyboard.press("Enter")
    tab_to(page, "All ")  # every tool of the queue
    page.keyboard.press("Space")
    expect(page.get_by_label("All ", exact=False)).to_be_checked()
    tab_to(page, "Note")
    page.keyboard.type("Badges tools of the loyalty sync, reviewed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "policy-review-1440.png"))  # the viewport: the decision and first rows
    tab_to(page, "Accept selected")
    page.keyboard.press("Enter")

    status = page.get_by_role("status")
    expect(status).to_contain_text("Accepted")
    expect(status).to_contain_text("wait for a second operator")
    expect(page.locator("#queue-count")).to_contain_text("wait for a second operator")
    active = dict(ToolPolicy.objects.filter(tool__name__in=NEW_TOOLS).values_list("tool__name", "status"))
    assert active == {"get_member_badges": "active", "award_member_badge": "active", "update_member_badge": "active"}
    waiting = set(PolicyChangeRequest.objects.filter(status="pending").values_list("tool__name", flat=True))
    assert "revoke_member_badge" in waiting and ToolPolicy.objects.count() > queue
    badge = ToolPolicy.objects.get(tool__name="get_member_badges")
    assert (badge.operation, badge.risk, badge.versions.get().author.username) == ("read", "low", "operator")
    assert badge.versions.get().note == "Badges tools of the loyalty sync, reviewed"


def test_the_review_page_has_no_serious_or_critical_axe_violation_at_1440_and_390(new_page, log_in):
    new_badge_tools()
    found = {}
    for viewport in (WIDEST, NARROW):
        page = new_page(viewport)
        log_in(page, "operator")
        page.goto(URL)
        found[f"queue at {viewport['width']}"] = violations_of(page)
        page.get_by_role("button", name="Accept selected").click()  # no note, nothing selected: errors shown
        expect(page.get_by_role("alert").first).to_be_visible()
        found[f"queue with errors at {viewport['width']}"] = violations_of(page)
    viewer = new_page(NARROW)
    log_in(viewer, "viewer")
    viewer.goto(URL)
    expect(viewer.locator("#review-get_member_badges")).to_contain_text("readOnlyHint: true")
    found["queue read-only at 390"] = violations_of(viewer)
    found = {where: violations for where, violations in found.items() if violations}
    assert found == {}, "axe-core: serious or critical violations\n" + report(found)
