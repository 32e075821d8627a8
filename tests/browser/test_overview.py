"""The overview in Chromium: every number live over /ws/overview/, charts readable by mouse, keyboard and table."""

import re
from decimal import Decimal

from playwright.sync_api import expect

from agents.console.metrics import turns_total
from agents.models import ModelProfile
from tests.browser.conftest import SCREENSHOTS, WIDEST
from tests.support.servers import free_port


def test_an_open_overview_shows_the_new_total_and_request_row_after_a_turn_runs_and_keeps_the_readers_place(
    new_page, log_in, ask_in_console, screenshot
):
    watcher = new_page()
    log_in(watcher, "viewer")
    watcher.goto("/")
    watcher.wait_for_selector("body[data-live=open]")
    before = turns_total()
    expect(watcher.locator('[data-counter="turns_total"]')).to_have_text(str(before))
    expect(watcher.locator("#overview-live")).to_contain_text("No requests yet.")
    # The reader has the turns chart's data table open and a bar focused: a refresh keeps both.
    turns_chart = watcher.locator("figure", has=watcher.locator("#turns-chart-caption"))
    turns_chart.get_by_text("Data table").click()
    turns_chart.locator(".point").last.focus()
    messages = int(watcher.evaluate("document.body.dataset.liveMessages || '0'"))
    # Another reader is on a chart's "Data table" summary (the keyboard's way from a chart to its table).
    reader = new_page()
    log_in(reader, "viewer")
    reader.goto("/")
    reader.wait_for_selector("body[data-live=open]")
    reader_chart = reader.locator("figure", has=reader.locator("#turns-chart-caption"))
    reader_chart.locator("summary").focus()
    reader_messages = int(reader.evaluate("document.body.dataset.liveMessages || '0'"))

    asker = new_page()
    log_in(asker, "operator")
    ask_in_console(asker, "What time is it in Paris?")
    asker.locator(".turn-status.status-done").wait_for()

    expect(watcher.locator('[data-counter="turns_total"]')).to_have_text(str(before + 1))
    recent = watcher.locator("#overview-live table", has_text="Fallback")
    expect(recent.get_by_role("link", name="What time is it in Paris?")).to_be_visible()
    assert int(watcher.evaluate("document.body.dataset.liveMessages")) > messages  # swapped live, not reloaded
    expect(turns_chart.locator("details.chart-data")).to_have_attribute("open", "")
    assert watcher.evaluate("document.activeElement.matches('#overview-live .point')")
    expect(reader.locator('[data-counter="turns_total"]')).to_have_text(str(before + 1))
    assert int(reader.evaluate("document.body.dataset.liveMessages")) > reader_messages
    expect(reader_chart.locator("summary")).to_be_focused()
    screenshot(watcher, "overview-live-1280")


def test_a_chart_value_shows_on_keyboard_focus_and_on_hover(new_page, log_in, ask_in_console, screenshot):
    asker = new_page()
    log_in(asker, "operator")
    ask_in_console(asker, "What is 15 + 27?")
    asker.locator(".turn-status.status-done").wait_for()
    for width in (1280, 390):
        page = new_page({"width": width, "height": 800})
        log_in(page, "viewer")
        page.goto("/")
        page.wait_for_selector("body[data-live=open]")
        turns_chart = page.locator("figure", has=page.locator("#turns-chart-caption"))
        # Keyboard: back from the chart's Data table, Shift+Tab reaches its one tab stop (the latest minute), the
        # arrows move.
        turns_chart.locator("summary").focus()
        page.keyboard.press("Shift+Tab")
        latest = turns_chart.locator(".point").last
        expect(latest).to_be_focused()
        expect(latest.locator(".tip")).to_be_visible()
        expect(latest.locator(".tip text")).to_have_text(re.compile(r"^\d\d:\d\d · 1 turn$"))
        page.keyboard.press("ArrowLeft")
        previous = turns_chart.locator(".point").nth(58)
        expect(previous).to_be_focused()
        expect(previous.locator(".tip text")).to_have_text(re.compile(r"^\d\d:\d\d · 0 turns$"))
        expect(latest.locator(".tip")).to_be_hidden()
        screenshot(page, f"overview-chart-focus-{width}")
        # Mouse: hovering a request of the latency chart shows both of its figures.
        latency = page.locator("figure", has=page.locator("#latency-chart-caption"))
        point = latency.locator(".point").last
        point.locator(".hit").hover()
        expect(point.locator(".tip text")).to_have_text(re.compile(r" · turn \d+ ms · steward \d+ ms$"))
        # The data table carries the same values for a screen reader.
        latency.get_by_text("Data table").click()
        expect(latency.locator("table tbody tr")).to_have_count(1)
        assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_breakdown_prices_each_profiles_turns_in_the_operators_own_time_zone(
    new_page, log_in, ask_in_console, screenshot
):
    """Cost by profile from an admin's prices, and every time in the operator's zone: the browser's until they save
    their own on /account/ (by keyboard), then that one, with its abbreviation, in the header and the range form."""
    ModelProfile.objects.filter(name="chat-8k").update(input_price=Decimal("150"), output_price=Decimal("600"))
    page = new_page(WIDEST, timezone_id="Asia/Ho_Chi_Minh")
    log_in(page, "operator")
    # Chromium's ICU names the zone by its older alias: either is the tz database's
    expect(page.locator("header .zone")).to_contain_text(re.compile(r"Asia/(Ho_Chi_Minh|Saigon) \(\+07\)"))
    ask_in_console(page, "What is the points balance of member mem_lan00001?", model="chat-8k")
    page.locator(".turn-status.status-done").wait_for()

    page.goto("/?range=day#overview-range")
    breakdown = page.locator("section.breakdown")
    expect(breakdown.locator(".range-form")).to_contain_text("(+07, at most 92 days)")
    row = breakdown.get_by_role("row", name=re.compile(r"^chat-8k "))
    expect(row.get_by_role("cell").nth(3)).to_have_text(re.compile(r"^[1-9]\d* / [1-9]\d*$"))  # tokens in / out
    expect(row.get_by_role("cell").nth(4)).to_have_text(re.compile(r"^\d+\.\d{2,4}$"))  # cost
    expect(breakdown.locator(".card").first).to_contain_text("1 turn, 0 failed")
    profiles = breakdown.get_by_role("group", name="Turns, tokens and cost by model profile")
    assert profiles.evaluate("wrap => wrap.scrollWidth <= wrap.clientWidth")  # every column shown, cost included
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    breakdown.screenshot(path=str(SCREENSHOTS / "overview-cost-1440.png"))  # the breakdown itself, for the docs

    page.goto("/account/")
    expect(page.locator("#time-zone-now")).to_contain_text(re.compile("Asia/(Ho_Chi_Minh|Saigon)"))
    expect(page.locator("#time-zone-now")).to_contain_text("your browser's zone")
    zone = page.get_by_label("Show times in")
    zone.focus()
    zone.select_option("Europe/Paris")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Save")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".flash")).to_contain_text("Saved: pages show times in Europe/Paris.")
    expect(page.locator("#time-zone-now")).to_contain_text("as you chose below")
    expect(page.locator("header nav [aria-current=page]")).to_have_count(0)  # the account is no menu section
    expect(page.locator("header .zone")).to_contain_text(re.compile(r"Europe/Paris \(CES?T\)"))
    screenshot(page, "account-time-zone-1440")


def test_errors_are_in_sight_a_failed_turn_and_a_failed_tool_call_link_to_their_pages(new_page, log_in, ask_in_console):
    """A turn whose model server is down fails, a turn answers although its tool call failed: the overview's errors
    say both, list the failed turn with its error and the failing tool, each a link the keyboard follows."""
    ModelProfile.objects.create(name="down", upstream_model="m", base_url=f"http://127.0.0.1:{free_port()}/v1",
                                context_window=8192, max_output_tokens=512, reserved_result_tokens=512)  # fmt: skip
    page = new_page(WIDEST)
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?", model="down")
    page.locator(".turn-status.status-failed").wait_for()
    failed_at = page.url
    ask_in_console(page, "What is 1/0?")
    page.locator(".turn-status.status-done").wait_for()

    page.goto("/")
    errors = page.locator("#recent-errors + .cards")
    expect(errors).to_contain_text("1 failed turn of 2 ended (50 %)")
    expect(errors).to_contain_text("1 turn answered although a tool call failed")
    expect(page.locator("#failing-tools + ul")).to_contain_text(re.compile(r"calculate: 1 of 1 call failed"))
    failed = page.locator("ul.failed-turns li")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("could not be reached (no connection)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # The viewport (live counters and errors, at the top): no scrolling to an element of the live section, which
    # its socket swaps whole on each refresh.
    page.screenshot(path=str(SCREENSHOTS / "overview-errors-1440.png"))
    failed.get_by_role("link").press("Enter")  # focus and Enter on the link as it is now (the section is live)
    page.wait_for_url(re.compile(re.escape(failed_at.split("#")[0])))
    expect(page.locator(".turn-status.status-failed")).to_be_visible()
