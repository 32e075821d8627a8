"""The approvals inbox in a real browser: a waiting call shows up with its deadline, and a second operator denies it
with a reason from the keyboard alone; the reason reaches the conversation's page live."""

from playwright.sync_api import expect

from agents.models import ToolApproval, Turn
from tests.browser.test_console import set_calculator


def waiting_call(page, log_in, ask_in_console) -> tuple[Turn, ToolApproval]:
    """An operator's console turn whose calculate call waits for an approval (shown on their page)."""
    set_calculator(requires_confirmation=True)
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    turn = Turn.objects.get()
    page.locator(f"#turn-{turn.id}").get_by_role("button", name="Approve").wait_for()
    return turn, ToolApproval.objects.get(turn=turn)


def test_a_second_operator_denies_a_waiting_call_from_the_inbox_with_a_reason_by_keyboard(
    page, new_page, log_in, ask_in_console, screenshot
):
    turn, approval = waiting_call(page, log_in, ask_in_console)

    inbox = new_page()
    log_in(inbox, "admin")
    expect(inbox.locator("#nav-count-approvals")).to_contain_text("1")
    inbox.get_by_role("link", name="Approvals").first.click()
    inbox.wait_for_url("**/approvals/")
    item = inbox.locator(f"#inbox-approval-{approval.pk}")
    expect(item).to_contain_text("calculate")
    expect(item).to_contain_text("started by operator")
    expect(item.locator(".deadline")).to_contain_text("expires at")
    expect(item.locator("[data-countdown]")).to_contain_text(" s")  # the countdown ticks in the browser
    screenshot(inbox, "approvals-inbox-1280")

    reason = item.get_by_label("Deny reason")
    reason.focus()
    inbox.keyboard.type("not before the audit")
    inbox.keyboard.press("Tab")
    expect(item.get_by_role("button", name="Deny")).to_be_focused()
    inbox.keyboard.press("Enter")
    expect(item.locator(".approval-status")).to_have_text("denied")
    expect(item.locator(".approval-reason")).to_contain_text("reason: not before the audit")

    expect(page.locator(f"#turn-{turn.id}-events")).to_contain_text("denied by admin: not before the audit")
    page.locator(f"#turn-{turn.id} .status-done").wait_for()
    approval.refresh_from_db()
    assert (approval.status, approval.reason, approval.decided_by.username) == ("denied", "not before the audit",
                                                                                "admin")  # fmt: skip
    inbox.reload()
    expect(inbox.locator(f"#inbox-approval-{approval.pk}")).to_have_count(0)
    expect(inbox.locator("#nav-count-approvals")).to_have_count(0)


def test_an_open_inbox_shows_a_new_waiting_call_and_its_decision_without_a_reload(page, new_page, log_in,
                                                                                  ask_in_console):  # fmt: skip
    """/ws/approvals/ tells the inbox to read itself again: within seconds, where its own poll waits 30 s."""
    set_calculator(requires_confirmation=True)
    inbox = new_page()
    log_in(inbox, "admin")
    inbox.goto("/approvals/")
    expect(inbox.locator("#tool-call-approvals")).to_contain_text("No tool call is waiting")
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    turn = Turn.objects.get()
    page.locator(f"#turn-{turn.id}").get_by_role("button", name="Approve").wait_for()
    approval = ToolApproval.objects.get(turn=turn)
    item = inbox.locator(f"#inbox-approval-{approval.pk}")
    expect(item).to_contain_text("calculate", timeout=10_000)  # the poll alone would take up to 30 s
    page.locator(f"#turn-{turn.id}").get_by_role("button", name="Approve").click()  # decided elsewhere
    expect(inbox.locator("#tool-call-approvals")).to_contain_text("No tool call is waiting", timeout=10_000)


def test_a_refresh_answering_while_a_deny_reason_is_typed_does_not_wipe_it(page, new_page, log_in, ask_in_console):
    """The inbox asks to be read again only while nobody types in it, but a refresh asked just before the typing
    began may answer during it: that answer is not swapped in (the reason stays as typed)."""
    _turn, approval = waiting_call(page, log_in, ask_in_console)
    inbox = new_page()
    log_in(inbox, "admin")
    inbox.goto("/approvals/")
    reason = inbox.locator(f"#inbox-approval-{approval.pk}").get_by_label("Deny reason")
    reason.wait_for()

    held = []  # the inbox's next refresh, held until the reason is being typed
    inbox.route(
        "**/approvals/", lambda route: held.append(route) if route.request.method == "GET" else route.continue_()
    )
    for _ in range(50):  # a refresh asked while nothing is typed (one asked before the route, in flight, drops it)
        if held:
            break
        inbox.evaluate("document.body.dispatchEvent(new CustomEvent('approvals-changed'))")
        inbox.wait_for_timeout(100)
    assert len(held) == 1
    reason.focus()
    inbox.keyboard.type("not before the")
    held[0].continue_()  # its answer arrives while the field holds text and the focus
    inbox.wait_for_load_state("networkidle")
    inbox.keyboard.type(" audit")

    expect(reason).to_have_value("not before the audit")
    expect(reason).to_be_focused()
