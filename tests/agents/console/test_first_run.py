"""First run: the empty console offers example requests that work on the demo catalog, and the overview leads with
what an operator acts on."""

import html
import json
import re
from urllib.parse import urlencode

import pytest
from django.test import override_settings

from agents.console import overview
from agents.console.examples import EXAMPLE_REQUESTS
from agents.models import Conversation, Message, Turn
from agents.turns import runtime
from agents.turns.start import create_turn
from catalog.models import Tool
from demo.loyalty_mcp.seed import MEMBERS
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


def example_links(page: str) -> list[tuple[str, str, str]]:
    """(href, lang, text) of each example link on the page."""
    links = re.findall(r'<a href="([^"]*)" lang="([^"]*)" data-example>([^<]*)</a>', page)
    return [(html.unescape(href), lang, html.unescape(text)) for href, lang, text in links]


def test_an_operator_with_no_conversation_gets_example_requests_in_english_and_vietnamese(client):
    client.force_login(make_user("operator", role="operator"))
    page = client.get("/console/").content.decode()
    assert 'id="example-requests"' in page and "No conversations yet." in page
    links = example_links(page)
    assert [text for _, _, text in links] == [example.text for example in EXAMPLE_REQUESTS]
    assert all(href == "/console/?" + urlencode({"message": text}) for href, _, text in links)
    assert sum(lang == "vi" for _, lang, _ in links) >= 2 and sum(lang == "en" for _, lang, _ in links) >= 2


def test_a_viewer_gets_no_example_requests(client):
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/console/", {"message": "What is 1 + 1?"}).content.decode()
    assert 'id="example-requests"' not in page and not example_links(page) and 'name="message"' not in page


def test_the_examples_leave_once_there_is_a_conversation(client):
    operator = make_user("operator", role="operator")
    create_turn(Conversation.objects.create(owner=operator), "What is 1 + 1?")
    client.force_login(operator)
    page = client.get("/console/").content.decode()
    assert 'name="message"' in page and 'id="example-requests"' not in page


def test_an_example_link_fills_the_message_box_and_sends_nothing(client):
    client.force_login(make_user("operator", role="operator"))
    example = EXAMPLE_REQUESTS[4]  # Vietnamese, with a demo member id
    href, _, _ = example_links(client.get("/console/").content.decode())[4]
    response = client.get(href)
    page = response.content.decode()
    textarea = re.search(r"<textarea[^>]*>(.*?)</textarea>", page, re.S)
    assert response.status_code == 200 and "autofocus" in textarea.group(0)
    assert html.unescape(textarea.group(1)).strip() == example.text
    assert 'class="errors"' not in page and not Turn.objects.exists()


def test_a_message_longer_than_the_form_takes_is_cut_not_refused(client):
    client.force_login(make_user("operator", role="operator"))
    response = client.get("/console/", {"message": "x" * 5000})
    textarea = re.search(r"<textarea[^>]*>(.*?)</textarea>", response.content.decode(), re.S).group(1)
    assert response.status_code == 200 and textarea.strip() == "x" * 4000


def test_the_examples_name_demo_members_and_tools_the_demo_allows(demo_catalog):
    ids = {member for example in EXAMPLE_REQUESTS for member in re.findall(r"\bmem_\w+", example.text)}
    assert ids and ids <= set(MEMBERS)
    tools = Tool.objects.filter(name__in={example.tool for example in EXAMPLE_REQUESTS}, enabled=True)
    assert {tool.name: tool.policy.status for tool in tools.select_related("policy")} == dict.fromkeys(
        {example.tool for example in EXAMPLE_REQUESTS}, "active"
    )


def test_the_builtin_model_calls_each_examples_tool_on_the_demo_catalog(demo_catalog):
    owner = make_user("operator", role="operator")
    with override_settings(TOOLHUB_MODEL_PROVIDER="builtin"):
        for example in EXAMPLE_REQUESTS:
            turn = create_turn(Conversation.objects.create(owner=owner), example.text)
            runtime.run_turn(turn.id)
            calls = [call["function"] for m in Message.objects.filter(turn=turn) for call in m.tool_calls or []]
            arguments = [json.loads(call["arguments"] or "{}") for call in calls if call["name"] == example.tool]
            assert arguments, (example.text, calls)
            for member in re.findall(r"\bmem_\w+", example.text):
                assert {"member_id": member} in arguments


def test_the_overview_leads_with_approvals_running_turns_and_errors(client):
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/").content.decode()
    order = [
        'data-counter="turns_waiting"',
        'data-counter="turns_running"',
        'id="recent-errors"',
        'data-counter="turns_total"',
        'id="recent-requests"',
        "enabled tools",
        "schema tokens if every tool were loaded",
    ]
    positions = [page.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert page.index('id="overview-live"') < page.index("enabled tools")


def test_the_live_refresh_still_carries_every_counter_in_the_new_order():
    live = overview.render_live()
    assert live.lstrip().startswith('<section id="overview-live"')
    counters = re.findall(r'data-counter="(\w+)"', live)
    assert counters == ["turns_waiting", "turns_running", "turns_total", "turns_last_minute", "saved_total"]
    assert live.index('id="waiting-card"') < live.index('id="recent-errors"') < live.index('id="overview-traffic"')
