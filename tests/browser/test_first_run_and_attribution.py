"""A first-time operator and who started what, in Chromium: the empty console's examples (English and Vietnamese)
fill the message box and run on the demo; a request through the official openai SDK with `user` and `metadata` is
found by its tag and names its key, its user and its tags."""

import re

import openai
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agents.access.api_keys import create_api_key
from tests.browser.conftest import SCREENSHOTS, TURN_ENDS_MS, WIDEST

BALANCE_VI = "Hội viên mem_minh0001 còn bao nhiêu điểm?"


def test_the_empty_console_offers_examples_whose_vietnamese_one_runs_on_the_demo_by_keyboard(new_page, log_in):
    page = new_page(WIDEST)
    log_in(page, "operator")
    page.goto("/console/")
    examples = page.locator("#example-requests")
    expect(examples.locator("a[lang=en]")).not_to_have_count(0)
    expect(page.locator("#conversation-list")).to_contain_text("No conversations yet.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "console-first-run-1440.png"))
    example = examples.get_by_role("link", name=BALANCE_VI)
    expect(example).to_have_attribute("lang", "vi")
    example.focus()
    page.keyboard.press("Enter")
    box = page.get_by_label("Start a conversation")
    expect(box).to_have_value(BALANCE_VI)
    box.focus()
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/console/*/")
    turn = page.locator(".turn").first
    expect(turn.locator(".turn-status")).to_have_text("done", timeout=TURN_ENDS_MS)
    called = turn.get_by_role("link", name="get_member_balance").first
    expect(called).to_be_visible()
    assert "/get_member_balance/" in (called.get_attribute("href") or "")


def test_an_sdk_request_with_user_and_metadata_is_found_by_its_tag_and_names_key_user_and_tags(
    browser_stack, new_page, log_in
):
    operator = get_user_model().objects.get(username="operator")
    _, secret = create_api_key(user=operator, name="loyalty-bot")
    client = openai.OpenAI(base_url=f"{browser_stack.url}/v1", api_key=secret, max_retries=0, timeout=120)
    answer = client.chat.completions.create(
        model="toolhub", messages=[{"role": "user", "content": "What time is it in Hanoi?"}],
        user="agent-7", metadata={"ticket": "LOY-42", "team": "<b>loyalty</b>"},
    )  # fmt: skip
    assert answer.choices[0].message.content
    with_other_tag = client.chat.completions.create(
        model="toolhub", messages=[{"role": "user", "content": "What time is it in Hanoi?"}], metadata={"ticket": "X"}
    )
    assert with_other_tag.choices[0].message.content

    page = new_page(WIDEST)
    log_in(page, "operator")
    page.goto("/console/search/")
    page.get_by_label("Tag (key=value)").fill("ticket=LOY-42")
    page.get_by_label("Tag (key=value)").press("Enter")
    page.wait_for_url(re.compile(r"tag=ticket%3DLOY-42"))
    results = page.locator("ol.search-results li.search-result")
    expect(results).to_have_count(1)
    expect(results).to_contain_text("API, key loyalty-bot")
    page.screenshot(path=str(SCREENSHOTS / "turn-search-tag-1440.png"))
    results.get_by_role("link").first.click()
    page.wait_for_url(re.compile(r"/console/\d+/"))
    expect(page.locator("main")).to_contain_text("with the API key loyalty-bot for the user agent-7")
    tags = page.get_by_role("list", name="The request's metadata")
    expect(tags).to_contain_text("team=<b>loyalty</b>")  # shown as text, never as markup
    expect(tags.get_by_role("link", name="ticket=LOY-42")).to_have_attribute(
        "href", "/console/search/?tag=ticket%3DLOY-42"
    )
