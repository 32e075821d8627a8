"""Accessibility and layout of every page: axe-core finds no serious or critical violation at 1440 and 390 px,
controls are reachable with Tab, the navigation stays compact at 390 px and no page scrolls sideways at 1280 px.

axe-core is vendored in tests/browser/vendor/ (see its README) and run inside each page through Playwright's
evaluate, which the page's Content-Security-Policy does not govern (the page itself loads nothing new).
"""

import datetime
from pathlib import Path

from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from playwright.sync_api import expect

from agents.models import Conversation, RoutingLog, ServerQuestion, Turn
from agents.turns.approvals import request_approval
from agents.turns.start import create_turn
from agents.turns.workflows import start_workflow
from catalog.models import Tool
from catalog.policies.decision import RoutingDecision
from tests.browser.conftest import NARROW, WIDE, WIDEST
from tests.browser.test_console import DUPLICATED_LANDMARKS, UNREACHABLE_SCROLLERS, set_calculator
from tests.browser.test_dashboard_pages import stale_snippet
from tests.browser.test_oauth_consent import authorize_url

AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"
TOOL = "dns_lookup"
# Every URL name of toolhub/urls.py, agents/urls.py and catalog/web/urls.py is a page visited below or one of these.
NOT_PAGES = {
    "favicon": "redirects to the icon",
    "logout": "POST only",
    "admin": "Django's admin, left out: its templates are Django's",
    "oauth2_provider": "OAuth metadata, token and registration endpoints answer JSON (the consent page is visited)",
    "tool-example-add": "POST only (its form is on the tool's page)",
    "tool-example-edit": "POST only (its form is on the tool's page)",
    "tool-example-delete": "POST only (its form is on the tool's page)",
    "knowledge-export": "CSV",
    "knowledge-review-undo": "POST only (its button follows a review on /knowledge/)",
    "knowledge-bulk": "POST only (its buttons are on /knowledge/)",
    "mcp-server-test": "POST only (its button is on the server's page)",
    "mcp-server-sync": "POST only (its button is on the server's page)",
    "mcp-server-progress": "an htmx fragment of the server's page",
    "mcp-server-oauth-connect": "POST only: a page that moves on to the authorization server at once",
    "mcp-server-oauth-disconnect": "POST only (its button is on the server's page)",
    "mcp-oauth-callback": "needs an authorization server: axe checks where it lands and its error page in "
    "tests/integration/test_mcp_oauth_upstream.py",
    "workflow-cancel": "POST only (its button is on /workflows/)",
    "policy-change-decide": "POST only (its buttons are on the policy's page and /approvals/)",
    "policy-always-load": "POST only (its form is on the policy's page)",
    "api-chat-completions": "the JSON/SSE API",
    "api-openapi": "the JSON API",
    "api-models": "the JSON API",
    "api-model": "the JSON API",
    "api-approval": "the JSON API",
    "metrics": "Prometheus text for a scraper, behind a bearer token",
    "approval-decide": "POST only (its buttons are on the conversation's page and /approvals/)",
    "turn-cancel": "POST only (its button is on the conversation's page)",
}
# A form with each kind of field an MCP server's question may ask for (agents/console/question_form.py).
QUESTION_FORM = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "title": "Colour", "description": "One word", "maxLength": 20},
        "width": {"type": "integer", "title": "Width (px)", "minimum": 100},
        "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
        "extras": {"type": "array", "title": "Extras", "items": {"type": "string", "enum": ["border", "shadow"]}},
        "urgent": {"type": "boolean", "title": "Urgent"},
        "contact": {"type": "string", "format": "email"},
    },
    "required": ["colour", "width"],
}
# Opens every disclosure (so what it hides is checked too), runs axe, keeps the serious and critical violations.
RUN_AXE = """async () => {
  document.querySelectorAll('details').forEach((el) => { el.open = true; });
  const results = await axe.run(document, {resultTypes: ['violations']});
  return results.violations.filter((v) => ['serious', 'critical'].includes(v.impact)).map((v) => ({
    id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((node) => node.target.join(' ')).slice(0, 5),
  }));
}"""
PAGE_NAMES = (
    "overview", "console", "console-conversation", "approvals", "turn-search", "tool-activity", "routing",
    "routing-detail", "workflows", "catalog", "tool-detail", "policies", "policy-detail", "policy-simulate",
    "policy-rollback", "policy-review", "knowledge", "knowledge-review", "knowledge-detail", "mcp-servers",
    "mcp-server-detail", "mcp-server-add", "mcp-server-edit", "account", "question",
)  # fmt: skip


def url_names(patterns) -> set[str]:
    names = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            names |= {pattern.namespace} if pattern.namespace else url_names(pattern.url_patterns)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(pattern.name)
    return names


def violations_of(page) -> list[dict]:
    """axe-core's serious and critical violations, and two checks of ours: a scrolling region no keyboard reaches
    (axe passes one whose content is all hidden), a landmark sharing its role and name with another."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    violations = page.evaluate(RUN_AXE)
    if scrollers := page.evaluate(UNREACHABLE_SCROLLERS):
        violations.append({"id": "unreachable-scroller", "impact": "serious", "targets": scrollers,
                           "help": "A scrolling region must be focusable or hold something focusable"})  # fmt: skip
    if landmarks := page.evaluate(DUPLICATED_LANDMARKS):
        violations.append({"id": "duplicated-landmark", "impact": "serious", "targets": landmarks,
                           "help": "Landmarks of one role need distinct names"})  # fmt: skip
    width = page.viewport_size["width"]
    if (scroll_width := page.evaluate("document.documentElement.scrollWidth")) > width:
        violations.append({"id": "page-scrolls-sideways", "impact": "serious", "targets": [f"{scroll_width} px"],
                           "help": f"The page must fit {width} px without scrolling sideways"})  # fmt: skip
    return violations


def report(found: dict) -> str:
    lines = []
    for where, violations in found.items():
        for v in violations:
            lines.append(f"{where}: {v['impact']} {v['id']} at {v['targets']}: {v['help']}")
    return "\n".join(lines)


def build_pages(page, ask_in_console) -> dict[str, str]:
    """The data every page needs to show what it can (turns with a denied list and approvals, a second policy
    version, logs to simulate, a stale snippet, a workflow), and the pages by URL name."""
    admin = get_user_model().objects.get(username="admin")
    set_calculator(requires_confirmation=True)  # a second version of its policy too (rollback, history)
    ask_in_console(page, "What is 15 + 27?")  # waits for an approval, approved below
    page.get_by_role("button", name="Approve").click()
    page.locator(".turn .status-done").wait_for()
    decided = page.url
    ask_in_console(page, "What is 2 + 2?")  # left waiting: Approve and Deny stay on its page
    page.get_by_role("button", name="Approve").wait_for()
    turn = Turn.objects.order_by("pk").first()
    start_workflow(conversation=turn.conversation, owner=admin, kind="rule", phase="draft")
    RoutingLog.objects.create(
        query="where does example.com point", decision=RoutingDecision("get", frozenset(), 0.9).as_dict()
    )
    Tool.objects.filter(pk=Tool.objects.exclude(name__in=("calculate", TOOL)).order_by("name")[0].pk).update(
        enabled=False
    )  # listed greyed out in the catalog and policies
    question = ServerQuestion.objects.create(  # an MCP server's question, waiting: on its page and in the inbox
        turn=turn, message="Which colour, size and extras should the banner have?", requested_schema=QUESTION_FORM,
        expires_at=timezone.now() + datetime.timedelta(hours=1),
    )  # fmt: skip
    snippet = stale_snippet("Accessibility: stale snippet", overdue=40)
    for width in ("1440", "390"):  # one reviewed at each width
        stale_snippet(f"Accessibility: reviewed at {width}", overdue=400)
    return {
        "overview": "/",
        "console": "/console/",
        "console-conversation": decided,
        "console-conversation (approval pending)": page.url,
        "approvals": "/approvals/",  # the turn above waits: its card with Approve, Deny and a reason
        "turn-search": "/console/search/?q=15&tool=calculate",
        "tool-activity": "/console/tools/calculate/",
        "routing": "/routing/",
        "routing-detail": f"/routing/{turn.routing_log.pk}/",
        "workflows": "/workflows/",
        "catalog": "/catalog/",
        "tool-detail": f"/catalog/{TOOL}/",
        "policies": "/policies/",
        "policy-detail": "/policies/calculate/",
        "policy-simulate": "/policies/calculate/",  # Simulate swaps the simulation into the editor
        "policy-rollback": "/policies/calculate/rollback/1/",
        "policy-review": "/policies/-/review/",  # the demo's tools without an active policy, with their proposals
        "knowledge": "/knowledge/",
        "knowledge-review": "/knowledge/",  # Mark reviewed: the row goes, its feedback offers Undo
        "knowledge-detail": f"/knowledge/{snippet.key}/",
        "mcp-servers": "/mcp-servers/",
        "mcp-server-detail": "/mcp-servers/loyalty/",
        "mcp-server-add": "/mcp-servers/add/",
        "mcp-server-edit": "/mcp-servers/loyalty/edit/",
        "turn-search (a bad date)": "/console/search/?since=2026-13-45",
        "account": "/account/",
        "question": f"/console/questions/{question.pk}/",
    }


def test_every_url_is_a_visited_page_or_named_as_not_one():
    """The page list below is built from the URL names, so a new page cannot be forgotten."""
    pages = set(PAGE_NAMES) | {"login", "oauth2_provider"}
    assert url_names(get_resolver().url_patterns) - set(NOT_PAGES) - pages == set()


def test_no_page_has_a_serious_or_critical_axe_violation_at_1440_or_390(
    browser_stack, new_page, log_in, ask_in_console
):
    builder = new_page()
    log_in(builder, "admin")
    pages = build_pages(builder, ask_in_console)
    assert set(PAGE_NAMES) <= set(pages)
    found = {}
    for viewport in (WIDEST, NARROW):
        width = viewport["width"]
        page = new_page(viewport)
        page.goto("/login/")
        found[f"login at {width}"] = violations_of(page)
        log_in(page, "admin")
        for name, path in pages.items():
            page.goto(path)
            if name == "policy-simulate":
                page.get_by_role("button", name="Simulate").click()
                expect(page.locator("#simulation")).to_contain_text("requests would change")
            if name == "knowledge-review":
                page.get_by_role("button", name="Mark reviewed").first.click()
                expect(page.get_by_role("button", name="Undo")).to_be_visible()
            found[f"{name} {path} at {width}"] = violations_of(page)
        missing = page.goto("/no-such-page/")
        assert missing.status == 404
        found[f"404 at {width}"] = violations_of(page)
        page.goto(authorize_url(browser_stack.url))
        expect(page.get_by_role("button", name="Allow")).to_be_visible()
        found[f"oauth consent at {width}"] = violations_of(page)
        viewer = new_page(viewport)
        log_in(viewer, "viewer")
        assert viewer.goto("/policies/calculate/rollback/1/").status == 403
        found[f"403 at {width}"] = violations_of(viewer)
    found = {where: violations for where, violations in found.items() if violations}
    assert found == {}, "axe-core: serious or critical violations\n" + report(found)


def tab_through(page, limit: int = 400) -> list[dict]:
    """Press Tab from the top of the page until focus leaves it or comes back; the focused elements, in order."""
    page.evaluate("""() => {
      window.__reached = new Set();
      document.addEventListener('focusin', (event) => window.__reached.add(event.target));
      document.activeElement && document.activeElement.blur();
    }""")
    stops = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        stop = page.evaluate(DESCRIBE_FOCUS)
        if stop is None or (stops and stop == stops[0]):
            break
        stops.append(stop)
    return stops


DESCRIBE_FOCUS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const label = el.labels && el.labels.length ? el.labels[0].textContent : '';
  const name = el.getAttribute('aria-label') || label || el.textContent || el.name || '';
  return {tag: el.tagName.toLowerCase(), name: name
    .trim().replace(/\\s+/g, ' ').replace(/:$/, '').slice(0, 60), href: el.getAttribute('href') || ''};
}"""
# Every visible, enabled control the page offers that Tab never reached (one radio of a group is enough).
UNREACHED_CONTROLS = """() => [...document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]:not([tabindex="-1"])')]
  .filter((el) => !el.disabled && el.checkVisibility() && !window.__reached.has(el))
  .filter((el) => el.type !== 'radio' || ![...document.getElementsByName(el.name)].some((r) => window.__reached.has(r)))
  .map((el) => el.outerHTML.slice(0, 100))"""


def test_tab_reaches_every_control_of_a_conversation_and_of_the_policy_editor(
    browser_stack, new_page, log_in, ask_in_console
):
    page = new_page()
    log_in(page, "operator")
    set_calculator(requires_confirmation=True)
    ask_in_console(page, "What is 15 + 27?")
    page.get_by_role("button", name="Approve").wait_for()
    page.locator("details").evaluate_all("(all) => all.forEach((el) => { el.open = true; })")
    names = [stop["name"] for stop in tab_through(page)]
    # Send is off while the turn waits (docs/pages.md); everything enabled is reached.
    for action in ("Skip to content", "Console", "Log out", "Approve", "Deny", "Message"):
        assert action in names, (action, names)
    assert any(name.startswith("Cancel turn") for name in names), names
    assert any(name.startswith("Denied (") for name in names), names  # the denied list's summary
    assert page.evaluate(UNREACHED_CONTROLS) == []

    page.goto("/policies/calculate/")
    names = [stop["name"] for stop in tab_through(page)]
    for action in ("Status", "Note", "Simulate", "Save new version"):
        assert action in names, (action, names)
    assert page.evaluate(UNREACHED_CONTROLS) == []


def menu_state(page) -> dict:
    """The Menu button as Chromium's accessibility tree gives it to a screen reader: its name and expanded state."""
    tree = page.context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
    (menu,) = [node for node in tree if node.get("role", {}).get("value") == "DisclosureTriangle"]
    expanded = {prop["name"]: prop["value"]["value"] for prop in menu.get("properties", [])}.get("expanded")
    return {"name": menu["name"]["value"], "expanded": expanded}


def test_the_navigation_is_one_compact_row_at_390_and_every_link_is_reachable_by_keyboard(new_page, log_in):
    page = new_page(NARROW)
    log_in(page, "operator")
    page.goto("/policies/")
    header = page.locator("header.top")
    assert header.bounding_box()["height"] <= 56
    assert menu_state(page) == {"name": "Menu", "expanded": False}  # a <summary>: a disclosure without JS
    navigation = page.get_by_role("navigation", name="Main")
    expect(navigation).to_be_hidden()
    stops = tab_through(page)
    assert [stop["name"] for stop in stops][:3] == ["Skip to content", "toolhub", "Menu"]
    page.locator("summary").first.focus()
    page.keyboard.press("Enter")
    assert menu_state(page) == {"name": "Menu", "expanded": True}
    expect(navigation).to_be_visible()
    links = navigation.get_by_role("link")
    expected = links.evaluate_all("(all) => all.map((a) => a.getAttribute('href'))")
    assert len(expected) >= 8
    reached = []
    for _ in expected:
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.getAttribute('href')"))
    assert reached == expected
    page.keyboard.press("Tab")  # the user's own settings (/account/: the time zone), then logging out
    assert page.evaluate("document.activeElement.getAttribute('href')") == "/account/"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Log out"

    # At 1280 px the header is one row on every section, its current one in bold, with the approvals badge too.
    owner = get_user_model().objects.get(username="operator")
    waiting = create_turn(Conversation.objects.create(owner=owner, title="badge"), "transfer points")
    request_approval(turn_id=waiting.pk, tool_call_id="call-1", tool_name=TOOL, arguments={}, risk="high")
    wide = new_page(WIDE)
    log_in(wide, "operator")
    expect(wide.get_by_role("navigation", name="Main")).to_be_visible()
    expect(wide.get_by_text("Menu", exact=True)).to_be_hidden()
    expect(wide.locator("#nav-count-approvals")).to_be_visible()
    for path in ("/", "/knowledge/", "/mcp-servers/", "/routing/", "/account/"):
        wide.goto(path)
        assert wide.locator("header.top").bounding_box()["height"] <= 56, path


LONG_QUERY = (
    "Please find every loyalty member who redeemed more than five hundred points in the last quarter and "
    + "https://example.com/"
    + "a-very-long-path-segment-without-spaces-" * 8
    + " then summarise" * 20
)


def test_a_very_long_query_does_not_push_the_routing_log_wider_than_the_window(new_page, log_in):
    decision = RoutingDecision("get", frozenset(), 0.9).as_dict() | {
        "domains": ["loyalty_members", "loyalty_rewards", "customer_support", "analytics_reporting"]
    }
    RoutingLog.objects.create(query=LONG_QUERY, decision=decision, steward_ms=1234, fallback=True)
    page = new_page(WIDE)
    log_in(page, "operator")
    page.goto("/routing/")
    row = page.locator("#log-table tbody tr[data-row]").first
    expect(row).to_contain_text("yes")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]
    for header in ("Steward ms", "Fallback"):
        box = page.get_by_role("columnheader", name=header).bounding_box()
        assert box["x"] + box["width"] <= WIDE["width"], header
    link = row.get_by_role("link")
    assert link.get_attribute("title") == LONG_QUERY  # the whole query, and the detail page has it too
    link.click()
    expect(page.get_by_text(LONG_QUERY.strip())).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]

    narrow = new_page(NARROW)
    log_in(narrow, "operator")
    narrow.goto("/routing/")
    assert narrow.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
    table = narrow.locator("#log-table")
    expect(table).to_have_attribute("tabindex", "0")
    assert table.get_attribute("aria-label") or table.get_attribute("aria-labelledby")
