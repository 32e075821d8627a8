"""The live console in a real browser: API turns appear and stream live, approvals, chat with routing status."""

import re

import openai
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agents.access.api_keys import create_api_key
from agents.models import Turn
from catalog.models import ToolPolicy
from catalog.policies.versions import record_policy_version
from tests.browser.conftest import TURN_ENDS_MS

# Records every status and answer text the list shows, as it changes, so a test can tell live updates from a reload.
WATCH_LIST = """() => {
  window.__seen = [];
  window.__notReloaded = true;
  new MutationObserver(() => {
    document.querySelectorAll('#conversation-list .conversation').forEach((row) => {
      const status = row.querySelector('.turn-status');
      window.__seen.push([status ? status.textContent : '', row.querySelector('.preview').textContent]);
    });
  }).observe(document.getElementById('main'), {subtree: true, childList: true, characterData: true});
}"""


def open_live(page, path: str) -> None:
    page.goto(path)
    page.wait_for_selector("body[data-live=open]")


def set_calculator(**changes) -> None:
    """Change the calculator's policy as the policy editor does: save, then a new version (the servers see it)."""
    policy = ToolPolicy.objects.get(tool__name="calculate")
    for field, value in changes.items():
        setattr(policy, field, value)
    policy.save()
    record_policy_version(policy, note="browser test")


def test_a_turn_started_through_the_api_appears_in_another_browsers_console_and_streams_live(
    browser_stack, new_page, log_in, screenshot
):
    watcher = new_page()
    log_in(watcher, "viewer")
    open_live(watcher, "/console/")
    watcher.evaluate(WATCH_LIST)

    operator = get_user_model().objects.get(username="operator")
    _, key = create_api_key(user=operator, name="browser test")
    client = openai.OpenAI(base_url=f"{browser_stack.url}/v1", api_key=key, max_retries=0, timeout=120)
    reply = client.chat.completions.create(model="toolhub", messages=[{"role": "user", "content": "What is 15 + 27?"}])
    assert "42" in reply.choices[0].message.content

    turn = Turn.objects.get()
    row = watcher.locator(f"#conversation-{turn.conversation_id}")
    row.locator(".status-done").wait_for()
    assert "What is 15 + 27?" in row.inner_text() and "42" in row.locator(".preview").inner_text()
    seen = watcher.evaluate("window.__seen")
    statuses = [status for status, _ in seen]
    assert "running" in statuses and statuses[-1] == "done", statuses
    assert statuses.index("running") < len(statuses) - 1  # running was shown before done, as it happened
    assert watcher.evaluate("window.__notReloaded")  # the same page, never reloaded
    screenshot(watcher, "console-list-1280")

    # A late joiner opening the conversation sees the whole stored history.
    late = new_page()
    log_in(late, "viewer")
    open_live(late, f"/console/{turn.conversation_id}/")
    thread = late.locator(f"#turn-{turn.id}")
    assert "15 + 27 = 42" in thread.locator(f"#turn-{turn.id}-content").inner_text()
    assert "calculate" in thread.locator(f"#turn-{turn.id}-routing").inner_text()
    assert thread.locator(".budget-bar").count() == 1


def test_an_operator_approves_a_pending_risky_call_from_the_console_and_the_turn_finishes(
    browser_stack, page, log_in, screenshot, ask_in_console
):
    set_calculator(requires_confirmation=True)
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    turn = Turn.objects.get()
    approve = page.locator(f"#turn-{turn.id}").get_by_role("button", name="Approve")
    approve.wait_for()
    expect(page.locator(f"#turn-{turn.id}-status")).to_have_text("waiting")
    page.evaluate("window.__notReloaded = true")
    screenshot(page, "console-approval-1280")
    approve.click()
    page.locator(f"#turn-{turn.id} .status-done").wait_for()
    assert "15 + 27 = 42" in page.locator(f"#turn-{turn.id}-content").inner_text()
    assert "approved" in page.locator(f"#turn-{turn.id} .approval").first.inner_text()
    assert page.evaluate("window.__notReloaded")
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE
    assert turn.approvals.get().decided_by.username == "operator"


def test_an_operator_chats_from_the_console_and_sees_routing_with_denied_tools_live(
    browser_stack, page, log_in, screenshot, ask_in_console
):
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    first = Turn.objects.get()
    page.locator(f"#turn-{first.id} .status-done").wait_for()
    loaded = page.locator(f"#turn-{first.id}-routing dt:text('Loaded') + dd").inner_text()
    assert "calculate" in loaded

    # The operator takes the calculator away; the next turn, asked from the same page, shows it denied.
    set_calculator(status=ToolPolicy.Status.REJECTED)
    page.evaluate("window.__notReloaded = true")
    page.get_by_label("Message").fill("What is 2 + 2?")
    page.get_by_role("button", name="Send").click()
    second = page.locator(".turn").nth(1)
    second.locator(".steward .denied").wait_for()
    denied = second.locator(".denied-list").text_content()  # collapsed: in the page, not shown
    assert "calculate" in denied and "Denied (" in second.locator(".denied summary").inner_text()
    assert "calculate" not in second.locator(".steward dt:text('Loaded') + dd").inner_text()
    assert page.evaluate("window.__notReloaded")
    second.locator(".turn-status.status-done").wait_for()
    screenshot(page, "console-conversation-1280")


# Elements a keyboard cannot scroll: they overflow, scroll, and neither are nor contain anything focusable.
UNREACHABLE_SCROLLERS = """() => [...document.querySelectorAll('body *')].filter((el) => {
  const style = getComputedStyle(el);
  const scrolls = /(auto|scroll)/.test(style.overflowY + style.overflowX);
  const overflows = el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1;
  const focusable = el.tabIndex >= 0 || el.querySelector('a[href], button, input, select, textarea, [tabindex]');
  return scrolls && overflows && el.getClientRects().length && !focusable;
}).map((el) => el.outerHTML.slice(0, 80))"""
# Landmarks (banner, navigation, main, regions with a name...) that share their role and name with another.
DUPLICATED_LANDMARKS = """() => {
  const seen = {};
  document.querySelectorAll('body > header, nav, main, aside, section[aria-label], section[aria-labelledby], '
                            + 'form[aria-label], [role=region], [role=navigation], [role=search]').forEach((el) => {
    const labelledBy = (el.getAttribute('aria-labelledby') || '').split(' ').map((id) => document.getElementById(id));
    const name = el.getAttribute('aria-label') || labelledBy.map((label) => label ? label.textContent : '').join(' ');
    const key = el.tagName + '|' + (el.getAttribute('role') || '') + '|' + name;
    seen[key] = (seen[key] || 0) + 1;
  });
  return Object.keys(seen).filter((key) => seen[key] > 1);
}"""


def test_turn_cards_lead_with_the_decision_collapse_the_denied_and_every_scroller_and_landmark_is_keyboard_ready(
    page, log_in, ask_in_console
):
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    page.locator(".turn .status-done").wait_for()
    page.get_by_label("Message").fill("What is 2 + 2?")
    page.get_by_role("button", name="Send").click()
    page.locator(".turn").nth(1).locator(".status-done").wait_for()
    card = page.locator(".turn").first
    denied = card.locator(".denied")
    expect(denied).not_to_have_attribute("open", "")
    expect(denied.locator(".denied-list")).to_be_hidden()
    expect(denied.locator("summary")).to_contain_text(re.compile(r"Denied \(\d+\): \d+ "))
    expect(card.locator("dt").first).to_have_text("Decision")
    assert card.locator("dt").nth(1).inner_text() == "Called"
    assert card.locator(".answer").bounding_box()["y"] < card.locator(".timeline").bounding_box()["y"]
    # Opened from the keyboard, the denied list is the next stop of Tab, so its scrolling is reachable too.
    denied.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(denied.locator(".denied-list")).to_be_visible()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('denied-list')")
    assert page.evaluate(UNREACHABLE_SCROLLERS) == []
    assert page.evaluate(DUPLICATED_LANDMARKS) == []


# Installed before the page's scripts: every change of the page records the turn statuses and whether Send is off.
WATCH_THREAD = """
  window.__states = [];
  document.addEventListener('DOMContentLoaded', () => {
    const record = () => {
      const send = document.getElementById('chat-send');
      const statuses = [...document.querySelectorAll('#thread .turn-status')].map((el) => el.textContent.trim());
      const why = document.getElementById('chat-send-why');
      window.__states.push({statuses: statuses.join(','), sendDisabled: send ? send.disabled : null,
                            whyShown: why ? !why.hidden : null});
    };
    record();
    new MutationObserver(record).observe(document.body, {subtree: true, childList: true, characterData: true,
                                                         attributes: true, attributeFilter: ['disabled', 'hidden']});
  });
"""


def test_a_new_conversation_opens_at_once_streams_its_turn_and_send_waits_for_each_turn(page, log_in):
    log_in(page, "operator")
    page.add_init_script(WATCH_THREAD)
    page.goto("/console/")
    page.get_by_label("Start a conversation").fill("What is 15 + 27?")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url("**/console/*/")
    send = page.get_by_role("button", name="Send")
    turn = page.locator(".turn").first
    expect(turn.locator(".turn-status")).to_have_text("done", timeout=TURN_ENDS_MS)
    expect(turn.locator(".content")).to_contain_text("42")
    expect(send).to_be_enabled()
    states = page.evaluate("window.__states")
    # The page showed the turn before it ended, filled live, with Send off the whole time it ran.
    running = [state for state in states if state["statuses"] and state["statuses"] != "done"]
    assert running, states
    assert all(state["sendDisabled"] and state["whyShown"] for state in running), states
    assert states[-1] == {"statuses": "done", "sendDisabled": False, "whyShown": False}
    expect(page.locator("#turn-announcer")).to_have_text("The answer is complete.")  # read out by screen readers

    # A second turn from the same page, sent with Ctrl+Enter from the message box: Send goes off as it is sent,
    # with the line that says why, and comes back when the turn ends.
    page.evaluate("window.__states = []")
    page.get_by_label("Message").fill("What is 2 + 2?")
    page.get_by_label("Message").press("Control+Enter")
    second = page.locator(".turn").nth(1)
    expect(second.locator(".turn-status")).to_have_text("done", timeout=TURN_ENDS_MS)
    expect(second.locator("h2")).to_contain_text("Turn 2")
    expect(send).to_be_enabled()
    states = page.evaluate("window.__states")
    assert any(state["sendDisabled"] for state in states), states
    assert all(state["sendDisabled"] and state["whyShown"] for state in states
               if state["statuses"] not in ("done", "done,done")), states  # fmt: skip
    expect(page.locator("#chat-send-why")).to_be_hidden()


PAGES = {"overview": "/", "console-list": "/console/", "routing": "/routing/", "workflows": "/workflows/"}


def test_the_console_overview_routing_and_workflow_pages_fit_1280_and_390_wide(
    browser_stack, new_page, log_in, screenshot, ask_in_console
):
    asker = new_page()
    log_in(asker, "operator")
    ask_in_console(asker, "What time is it in Paris?")
    asker.locator(".turn-status.status-done").wait_for()
    pages = {**PAGES, "console-conversation": asker.url.removeprefix(browser_stack.url),
             "routing-detail": f"/routing/{Turn.objects.get().routing_log.pk}/"}  # fmt: skip
    for width in (1280, 390):
        page = new_page({"width": width, "height": 800})
        log_in(page, "operator")
        for name, path in pages.items():
            page.goto(path)
            if name in ("overview", "console-list", "console-conversation"):
                page.wait_for_selector("body[data-live=open]")
            assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} overflows at {width}"
            screenshot(page, f"{name}-{width}")


def test_the_routing_log_filters_into_the_address_and_j_k_enter_open_a_row(browser_stack, page, log_in, ask_in_console):
    log_in(page, "operator")
    for question in ("What is the capital of France?", "What time is it in Paris?"):
        ask_in_console(page, question)
        page.locator(".turn-status.status-done").wait_for()
    page.goto("/routing/")
    page.get_by_label("Action").select_option("get")
    page.wait_for_url("**/routing/?*action=get*")  # htmx swapped the table and pushed the filters into the address
    rows = page.locator("#log-table tbody tr[data-row]")
    count_is = "(n) => document.querySelectorAll('#log-table tbody tr[data-row]').length === n"
    page.wait_for_function(count_is, arg=1)
    assert "Paris" in rows.first.inner_text()
    page.reload()  # a deep link keeps the filter
    assert page.get_by_label("Action").input_value() == "get" and rows.count() == 1
    page.get_by_label("Action").select_option("")
    page.wait_for_function(count_is, arg=2)
    page.get_by_label("Query contains").fill("capital of France")
    page.wait_for_function(count_is, arg=1)  # typing filters too
    assert "q=capital" in page.url
    page.get_by_label("Query contains").fill("")
    page.wait_for_function(count_is, arg=2)
    page.evaluate("document.activeElement.blur()")  # J and K type letters while a filter field has the focus
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert "current" in (rows.first.get_attribute("class") or "")
    page.keyboard.press("Enter")
    page.wait_for_url("**/routing/*/**")
    assert page.get_by_text("Denied (").is_visible()


# --- the builtin offline model runs the Loyalty MCP tools (demo.loyalty_mcp, stdio)
# -------------------------------------


def test_a_builtin_model_turn_calls_a_loyalty_mcp_tool_and_the_console_shows_its_result(
    browser_stack, page, log_in, screenshot, ask_in_console
):
    log_in(page, "operator")
    ask_in_console(page, "How many points does member mem_an000001 have?")
    turn = Turn.objects.get()
    page.locator(f"#turn-{turn.id} .status-done").wait_for()
    # The head is rendered with the page, and live events update its status but not the model a worker records
    # when it claims the turn: a page loaded before the claim names the model after a reload (a live update of it
    # is open work; the race made this check fail on a loaded host).
    page.reload()
    assert "builtin (offline, rule-based)" in page.locator(f"#turn-{turn.id} .turn-head").inner_text()
    call = page.locator(f"#turn-{turn.id}-events .event-tool_call", has_text="get_member_balance")
    expect(call).to_contain_text('→ get_member_balance({"member_id": "mem_an000001"})')
    result = page.locator(f"#turn-{turn.id}-events .event-tool_result", has_text="← get_member_balance")
    expect(result.locator("pre.result")).to_contain_text('"available": 1800')  # the seeded ledger, read over MCP
    expect(page.locator(f"#turn-{turn.id}-content")).to_contain_text("get_member_balance returned")
    expect(page.locator(f"#turn-{turn.id}-content")).to_contain_text("available 1800")
    assert "get_member_balance" in page.locator(f"#turn-{turn.id}-routing").inner_text()
    screenshot(page, "console-loyalty-tool-1280")


def test_a_builtin_model_turn_reaches_the_approval_of_a_loyalty_transfer_which_the_operator_approves(
    browser_stack, new_page, log_in, screenshot, ask_in_console
):
    """Four eyes (high risk): the operator who asked sees Deny and "needs another operator"; a second operator,
    in a browser of their own, approves, and the first operator's page shows it live."""
    page = new_page()
    log_in(page, "operator")
    ask_in_console(page, "Transfer 100 points from mem_lan00001 to mem_minh0001 as a family gift")
    turn = Turn.objects.get()
    approval = page.locator(f"#turn-{turn.id} .approval")
    approval.get_by_role("button", name="Deny").wait_for()
    expect(page.locator(f"#turn-{turn.id}-status")).to_have_text("waiting")
    expect(approval).to_contain_text("transfer_points")
    for argument in ('"from_member_id": "mem_lan00001"', '"to_member_id": "mem_minh0001"', '"points": 100'):
        expect(approval).to_contain_text(argument)  # in the schema's order, which a jsonb column does not keep
    expect(approval).to_contain_text("risk high")
    expect(approval).to_contain_text("Needs another operator")
    assert not approval.get_by_role("button", name="Approve").count()  # not for a call of their own turn
    assert not page.locator(f"#turn-{turn.id}-events .event-tool_result").count()  # nothing ran before the approval
    page.evaluate("window.__notReloaded = true")
    screenshot(page, "console-loyalty-approval-1280")

    operator = get_user_model().objects.get(username="operator")
    second = get_user_model().objects.create(username="second", password=operator.password)  # the same password
    second.groups.set(operator.groups.all())
    other = new_page()
    log_in(other, "second")
    open_live(other, f"/console/{turn.conversation_id}/")
    other.locator(f"#turn-{turn.id} .approval").get_by_role("button", name="Approve").click()

    page.locator(f"#turn-{turn.id} .status-done").wait_for()
    expect(approval.first).to_contain_text("approved")
    result = page.locator(f"#turn-{turn.id}-events .event-tool_result", has_text="← transfer_points")
    expect(result.locator("pre.result")).to_contain_text('"points": 100')
    # mem_lan00001 had 5,700 points and mem_minh0001 350 (demo/loyalty_mcp/seed.py): the transfer really ran.
    expect(result.locator("pre.result")).to_contain_text('"from_balance": 5600')
    expect(page.locator(f"#turn-{turn.id}-content")).to_contain_text("transfer_points returned")
    assert page.evaluate("window.__notReloaded")
    screenshot(page, "console-loyalty-approved-1280")
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE
    assert turn.approvals.get().decided_by.username == "second"


def test_an_operator_cancels_a_turn_waiting_for_an_approval_and_it_ends_cancelled_live(page, log_in, ask_in_console):
    log_in(page, "operator")
    ask_in_console(page, "Transfer 100 points from mem_lan00001 to mem_minh0001 as a family gift")
    turn = Turn.objects.get()
    expect(page.locator(f"#turn-{turn.id}-status")).to_have_text("waiting", timeout=TURN_ENDS_MS)
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    page.evaluate("window.__notReloaded = true")
    page.get_by_role("button", name=f"Cancel turn {turn.id}").click()
    expect(page.locator(f"#turn-{turn.id}-status")).to_have_text("cancelled")
    expect(page.locator(f"#turn-{turn.id}-events")).to_contain_text("⏹ Cancelled by operator")
    expect(page.get_by_role("button", name=f"Cancel turn {turn.id}")).to_have_count(0)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert page.evaluate("window.__notReloaded")  # all of it arrived live
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED
    assert not page.locator(f"#turn-{turn.id}-events .event-tool_result").count()  # the transfer never ran


def test_the_timeline_fills_live_and_a_reload_shows_the_same_waterfall(page, log_in, ask_in_console, screenshot):
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    turn = Turn.objects.get()
    timeline = page.locator(f"#turn-{turn.id}-timeline")
    expect(page.locator(f"#turn-{turn.id}-status")).to_have_text("done", timeout=TURN_ENDS_MS)
    expect(timeline.locator("tbody th").last).to_have_text("Record")
    live = timeline.locator("tbody").inner_text()
    for step in ("Steward", "Bundle", "Model call 1", "Tool calculate", "Record"):
        assert step in live, live
    expect(timeline.locator("rect.bar-tool")).to_have_count(1)
    screenshot(page, "console-timeline-1280")
    page.reload()
    page.wait_for_selector("body[data-live=open]")
    assert page.locator(f"#turn-{turn.id}-timeline tbody").inner_text() == live
