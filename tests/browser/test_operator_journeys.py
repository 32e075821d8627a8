"""Journeys across pages, as an operator lives them: a policy edited in the editor shows in the live console;
every main page at 1280 and 390 px wide (no sideways scrolling, keyboard reachable), with screenshots."""

import re

import pytest
from playwright.sync_api import expect

from agents.models import Turn
from toolhub.context_processors import NAVIGATION

WIDTHS = {1280: {"width": 1280, "height": 800}, 390: {"width": 390, "height": 844}}


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_a_tool_denied_in_the_policy_editor_shows_among_denied_in_the_open_console_without_a_reload(
    browser_stack, new_page, log_in, ask_in_console
):
    console = new_page()
    log_in(console, "operator")
    ask_in_console(console, "What is 15 + 27?")
    first = Turn.objects.get()
    console.locator(f"#turn-{first.id} .status-done").wait_for()
    expect(console.locator(f"#turn-{first.id}-routing dt:text('Loaded') + dd")).to_contain_text("calculate")
    console.evaluate("window.__notReloaded = true")

    # Another tab of the same operator: the policy editor takes the calculator away.
    editor = console.context.new_page()
    editor.goto("/policies/calculate/")
    editor.get_by_label("Status").select_option("rejected")
    editor.get_by_label("Note").fill("no calculator for now")
    editor.get_by_role("button", name="Save new version").click()
    expect(editor.get_by_role("status")).to_contain_text("Saved version")

    console.bring_to_front()
    send(console, "What is 15 + 27?")
    second = console.locator(".turn").nth(1)
    second.locator(".steward .denied").wait_for()
    expect(second.locator(".denied-list")).to_contain_text("calculate")
    expect(second.locator(".steward dt:text('Loaded') + dd")).not_to_contain_text("calculate")
    assert console.evaluate("window.__notReloaded"), "the console page was never reloaded"


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize("width", [1280, 390])
def test_every_main_page_fits_the_width_is_keyboard_reachable_and_is_captured(
    new_page, log_in, screenshot, width, ask_in_console
):
    page = new_page(WIDTHS[width])
    log_in(page, "operator")
    ask_in_console(page, "What is 15 + 27?")
    page.locator(".turn .status-done").first.wait_for()
    screenshot(page, f"console-conversation-{width}")
    assert no_sideways_scroll(page), "the conversation page scrolls sideways"
    turn = Turn.objects.get()
    for _label, path in NAVIGATION:
        page.goto(path)
        expect(page.locator("main h1").first).to_be_visible()
        assert no_sideways_scroll(page), f"{path} scrolls sideways at {width} px"
        slug = path.strip("/") or "overview"
        screenshot(page, f"{slug}-{width}")
    page.goto(f"/routing/{turn.routing_log.pk}/")
    screenshot(page, f"routing-detail-{width}")

    # Keyboard: from the top of the page, Tab reaches every main navigation link (at 390 px through the Menu button).
    page.goto("/")
    reached = set()
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('details.menu:not([open]) > summary')"):
            page.keyboard.press("Enter")
        reached.add(page.evaluate("document.activeElement.getAttribute('href')"))
    assert {path for _, path in NAVIGATION} <= reached


def luminance(css_color: str) -> float:
    red, green, blue = (int(part) for part in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_main_page_follows_the_light_or_dark_preference(browser, browser_stack, log_in, screenshot, scheme):
    context = browser.new_context(viewport=WIDTHS[1280], base_url=browser_stack.url, color_scheme=scheme)
    try:
        page = context.new_page()
        log_in(page, "operator")
        for _label, path in NAVIGATION:
            page.goto(path)
            colors = page.evaluate(
                "[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color,"
                " getComputedStyle(document.querySelector('main h1')).color]"
            )
            background, text, heading = (luminance(color) for color in colors)
            if scheme == "dark":
                assert background < 0.2 and text > 0.7 and heading > 0.7, (path, colors)
            else:
                assert background > 0.9 and text < 0.3 and heading < 0.3, (path, colors)
        page.goto("/")
        screenshot(page, f"overview-1280-{scheme}")
    finally:
        context.close()
