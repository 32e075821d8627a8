"""Turn search and a tool's activity in the browser: a turn run from the console is found by its text and by the
tool it called, its deep link opens the conversation at that turn, and the tool's activity opens from its catalog
page; by keyboard, at 1280 and 390 px."""

from playwright.sync_api import expect

from agents.models import Turn
from tests.browser.test_console import DUPLICATED_LANDMARKS, UNREACHABLE_SCROLLERS

NARROW = {"width": 390, "height": 844}
FOCUSED = "(id) => document.activeElement !== null && document.activeElement.id === id"


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_a_turn_is_found_by_text_and_by_tool_and_its_deep_link_and_tool_activity_open(
    page, log_in, ask_in_console, screenshot
):
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    page.locator(".turn .status-done").wait_for()
    page.get_by_label("Message").fill("What is 100 - 58?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".turn .turn-status.status-done")).to_have_count(2)
    first, second = Turn.objects.order_by("id")

    # By text, from the console's search box, with the keyboard only.
    page.goto("/console/")
    page.get_by_label("Search turns").fill("100 - 58")
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/search/?q=100+-+58")
    results = page.locator(".search-result")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text(f"Turn #{second.pk}")
    expect(results.first).to_contain_text("calculate")
    screenshot(page, "turn-search-1280")
    assert page.evaluate(DUPLICATED_LANDMARKS) == [] and page.evaluate(UNREACHABLE_SCROLLERS) == []

    # By tool: both turns called the calculator; the filters stay in the address.
    page.get_by_label("Text").fill("")
    page.get_by_label("Tool called").fill("calculate")
    page.get_by_label("Status").select_option("done")
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url("**/console/search/?*tool=calculate*")
    expect(results).to_have_count(2)
    expect(results.first).to_contain_text(f"Turn #{second.pk}")  # newest first
    page.reload()
    expect(results).to_have_count(2)
    assert page.get_by_label("Tool called").input_value() == "calculate"

    # A malformed date is an error beside its field, not a failure.
    page.get_by_label("From").fill("2026-05-02")
    page.get_by_label("To", exact=True).fill("2026-05-01")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("Fix the filter")
    expect(page.locator("#id_until_error")).to_have_text("The end comes before the start.")
    expect(results).to_have_count(0)

    # J / K then Enter open the older turn's deep link: the conversation, scrolled to that turn, which has the focus.
    page.goto("/console/search/?tool=calculate")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/console/{first.conversation_id}/#turn-{first.pk}")
    page.wait_for_selector("body[data-live=open]")
    page.wait_for_function(FOCUSED, arg=f"turn-{first.pk}")
    page.goto(f"/console/{second.conversation_id}/#turn-{second.pk}")  # the same page: only its hash changes
    target = page.locator(f"#turn-{second.pk}")
    page.wait_for_function(FOCUSED, arg=f"turn-{second.pk}")
    expect(target).to_be_in_viewport()
    # The page moved to the second turn's card: its top at the window's top, or as near as the page scrolls.
    scrolled, wanted = target.evaluate(
        "(el) => [window.scrollY, Math.min(el.getBoundingClientRect().top + window.scrollY,"
        " document.documentElement.scrollHeight - window.innerHeight)]"
    )
    assert wanted > 0 and abs(scrolled - wanted) <= 20, (scrolled, wanted)

    # The calculator's activity, from its catalog page, with its calls linked to their turns.
    page.goto("/catalog/calculate/")
    link = page.get_by_role("link", name="Calls, errors and latency")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/tools/calculate/")
    expect(page.locator("#activity-calls")).to_have_text("2")
    expect(page.locator("#activity-errors")).to_contain_text("0")
    expect(page.locator("#activity-p50")).to_contain_text("ms")
    calls = page.locator("table.tool-calls tbody tr")
    expect(calls).to_have_count(2)
    expect(calls.first.get_by_role("link")).to_have_text(f"Turn #{second.pk}")
    screenshot(page, "tool-activity-1280")
    assert page.evaluate(DUPLICATED_LANDMARKS) == [] and page.evaluate(UNREACHABLE_SCROLLERS) == []
    calls.first.get_by_role("link").click()
    page.wait_for_url(f"**/console/{second.conversation_id}/#turn-{second.pk}")

    # At 390 px: the search, its errors, the deep link and the activity fit the width.
    page.set_viewport_size(NARROW)
    for path, name in [("/console/search/?tool=calculate", "turn-search-390"),
                       ("/console/search/?since=2026-13-45", "turn-search-error-390"),
                       ("/console/tools/calculate/", "tool-activity-390")]:  # fmt: skip
        page.goto(path)
        expect(page.locator("main h1")).to_be_visible()
        assert no_sideways_scroll(page), f"{path} scrolls sideways at 390 px"
        screenshot(page, name)
    page.goto(f"/console/{second.conversation_id}/#turn-{second.pk}")
    page.wait_for_selector("body[data-live=open]")
    page.wait_for_function(FOCUSED, arg=f"turn-{second.pk}")
    expect(page.locator(f"#turn-{second.pk}")).to_be_in_viewport()
    assert no_sideways_scroll(page)
