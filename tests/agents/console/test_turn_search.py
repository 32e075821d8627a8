"""Turn search (/console/search/): every filter, bad input as a form error, pages, deep links, bounded queries."""

import datetime
import re

import pytest
from django.utils import timezone

from agents.console.turn_search import PAGE_SIZE, TurnFilters, excerpt, search_turns
from agents.models import Conversation, Message, RoutingLog, Turn, TurnEvent
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
URL = "/console/search/"
NOW = timezone.now()


def make_search_turn(owner, request, *, answer="", tools=(), status=Turn.Status.DONE, when=NOW, query=None):
    """A turn of a new conversation of `owner`: its request and answer, a tool_call event per tool, a routing log."""
    conversation = Conversation.objects.create(owner=owner, title=request[:200])
    turn = Turn.objects.create(conversation=conversation, status=status)
    Turn.objects.filter(pk=turn.pk).update(created_at=when)
    Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.USER, content=request)
    if answer:
        Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.ASSISTANT, content=answer)
    for sequence, name in enumerate(tools, start=1):
        TurnEvent.objects.create(turn=turn, sequence=sequence, type=TurnEvent.Type.TOOL_CALL,
                                 payload={"tool_name": name, "arguments": {}})  # fmt: skip
    RoutingLog.objects.create(turn=turn, query=request if query is None else query, decision={})
    turn.refresh_from_db()
    return turn


def found(filters: TurnFilters) -> list[int]:
    return list(search_turns(filters).values_list("pk", flat=True))


@pytest.fixture
def people():
    return make_user("ops", role="operator"), make_user("apiuser", role="operator")


def test_text_finds_a_turn_by_its_request_its_answer_or_its_routed_query_case_insensitively(people):
    ops, _ = people
    weather = make_search_turn(ops, "What is the weather in Hanoi?", answer="Sunny, 31 °C.")
    points = make_search_turn(ops, "Balance of M-42", answer="M-42 has 1,200 points.")
    routed = make_search_turn(ops, "(API request)", query="transfer points to member 7")
    assert found(TurnFilters(text="HANOI")) == [weather.pk]
    assert found(TurnFilters(text="1,200 points")) == [points.pk]
    assert found(TurnFilters(text="member 7")) == [routed.pk]
    assert found(TurnFilters(text="points")) == [routed.pk, points.pk]  # newest first
    assert found(TurnFilters(text="nowhere said")) == []


def test_text_with_like_wildcards_matches_them_literally(people):
    ops, _ = people
    make_search_turn(ops, "a plain request")
    percent = make_search_turn(ops, "a 100% sure request")
    assert found(TurnFilters(text="%")) == [percent.pk]
    assert found(TurnFilters(text="_")) == []


def test_tool_status_owner_and_dates_each_narrow_the_turns(people):
    ops, api_user = people
    old = make_search_turn(ops, "old sum", tools=["calculate"], when=NOW - datetime.timedelta(days=10))
    failed = make_search_turn(ops, "failed sum", tools=["calculate", "web_search"], status=Turn.Status.FAILED)
    api = make_search_turn(api_user, "via the API", tools=["get_member_balance"])
    assert found(TurnFilters(tool="calculate")) == [failed.pk, old.pk]
    assert found(TurnFilters(tool="web_search")) == [failed.pk]
    assert found(TurnFilters(tool="calc")) == []  # a tool's whole name, never a substring
    assert found(TurnFilters(status=Turn.Status.FAILED)) == [failed.pk]
    assert found(TurnFilters(owner="APIUSER")) == [api.pk]
    today = timezone.localdate(NOW)
    assert found(TurnFilters(since=today)) == [api.pk, failed.pk]
    assert found(TurnFilters(until=today - datetime.timedelta(days=1))) == [old.pk]
    ten_days_ago = timezone.localdate(NOW - datetime.timedelta(days=10))
    assert found(TurnFilters(since=ten_days_ago, until=ten_days_ago)) == [old.pk]  # `until` takes its whole day
    assert found(TurnFilters(tool="calculate", owner="ops", status=Turn.Status.DONE)) == [old.pk]


def test_a_tool_named_in_a_status_or_a_result_alone_is_not_a_call(people):
    ops, _ = people
    turn = make_search_turn(ops, "just a status")
    TurnEvent.objects.create(turn=turn, sequence=5, type=TurnEvent.Type.STATUS, payload={"tool_name": "web_search"})
    TurnEvent.objects.create(turn=turn, sequence=6, type=TurnEvent.Type.TOOL_RESULT, payload={"tool_name": "calculate"})
    assert found(TurnFilters(tool="web_search")) == [] and found(TurnFilters(tool="calculate")) == []


def test_an_excerpt_is_cut_around_the_text_searched():
    text = "x" * 300 + "the needle" + "y" * 300
    shown = excerpt(text, "NEEDLE")
    assert "the needle" in shown and shown.startswith("…") and shown.endswith("…") and len(shown) <= 162
    assert excerpt("short", "absent") == "short"


def test_the_page_lists_each_result_with_a_deep_link_to_the_turn_in_its_conversation(client, people):
    ops, _ = people
    turn = make_search_turn(ops, "What is 15 + 27?", answer="15 + 27 = 42.", tools=["calculate"])
    client.force_login(make_user("viewer", role="viewer"))
    response = client.get(URL, {"q": "15 + 27", "tool": "calculate"})
    page = response.content.decode()
    assert response.status_code == 200
    assert f'href="/console/{turn.conversation_id}/#turn-{turn.pk}"' in page
    assert "1 turn" in page and "<code>calculate</code>" in page and "15 + 27 = 42." in page
    assert 'value="15 + 27"' in page  # the form shows the search it ran
    assert "tool failed" not in page


def test_a_turn_answered_after_a_tool_failed_is_marked_in_the_results(client, people):
    ops, _ = people
    turn = make_search_turn(ops, "balance of M-9", answer="I could not read it.", tools=["get_member", "get_ledger"])
    TurnEvent.objects.create(turn=turn, sequence=10, type=TurnEvent.Type.TOOL_RESULT,
                             payload={"tool_name": "get_member", "is_error": True})  # fmt: skip
    TurnEvent.objects.create(turn=turn, sequence=11, type=TurnEvent.Type.TOOL_RESULT,
                             payload={"tool_name": "get_ledger", "refused": True})  # fmt: skip
    client.force_login(ops)

    page = client.get(URL, {"q": "M-9"}).content.decode()

    assert "tool failed: get_member, get_ledger" in page and "status-done" in page


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"since": "2026-13-45"}, "since", "Enter a valid date."),
        ({"until": "yesterday"}, "until", "Enter a valid date."),
        ({"status": "exploded"}, "status", "Select a valid choice."),
        ({"owner": "nobody-here"}, "owner", "No user is named nobody-here."),
        ({"since": "2026-05-02", "until": "2026-05-01"}, "until", "The end comes before the start."),
        ({"q": "x" * 201}, "q", "Ensure this value has at most 200 characters"),
    ],
)
def test_bad_input_is_a_400_with_the_error_beside_its_field_and_no_results(client, people, params, field, message):
    ops, _ = people
    make_search_turn(ops, "a turn that would match")
    client.force_login(ops)
    response = client.get(URL, params)
    page = response.content.decode()
    assert response.status_code == 400
    assert message in page and 'role="alert"' in page
    (widget,) = re.findall(rf'<(?:input|select)[^>]* id="id_{field}"[^>]*>', page)
    assert 'aria-invalid="true"' in widget and f"id_{field}_error" in widget
    assert f'id="id_{field}_error">' in page
    assert "a turn that would match" not in page and "search-result" not in page


def test_results_come_a_page_at_a_time_and_the_page_links_keep_the_filters(client, people):
    ops, _ = people
    turns = [make_search_turn(ops, f"sum number {i}", when=NOW - datetime.timedelta(minutes=i))
             for i in range(PAGE_SIZE + 5)]  # fmt: skip
    client.force_login(ops)
    first = client.get(URL, {"q": "sum number", "owner": "ops"}).content.decode()
    assert first.count('class="search-result"') == PAGE_SIZE
    assert f"{PAGE_SIZE + 5} turns" in first and "page 1 of 2" in first
    assert 'href="?q=sum+number&amp;owner=ops&amp;page=2"' in first
    second = client.get(URL, {"q": "sum number", "owner": "ops", "page": "2"}).content.decode()
    assert second.count('class="search-result"') == 5 and f"#turn-{turns[-1].pk}" in second
    assert 'href="?q=sum+number&amp;owner=ops&amp;page=1"' in second
    # A page number that is not one reads as the nearest page, never an error.
    assert client.get(URL, {"q": "sum number", "page": "abc"}).status_code == 200
    assert f"#turn-{turns[-1].pk}" in client.get(URL, {"q": "sum number", "page": "99"}).content.decode()


@pytest.mark.parametrize(("user", "status"), [(None, 302), ("nobody", 403), ("viewer", 200)])
def test_the_search_needs_the_consoles_permission(client, user, status):
    if user == "nobody":
        from django.contrib.auth import get_user_model

        client.force_login(get_user_model().objects.create_user("nobody", password="a-long-test-password"))
    elif user:
        client.force_login(make_user(user, role=user))
    response = client.get(URL, {"q": "anything"})
    assert response.status_code == status
    if status == 302:
        assert response.url.startswith("/login/")


def test_a_page_of_results_takes_the_same_queries_whatever_their_number(client, people, django_assert_max_num_queries):
    ops, api_user = people
    for i in range(PAGE_SIZE):
        make_search_turn(ops if i % 2 else api_user, f"request {i}", answer=f"answer {i}", tools=["calculate", "clock"])
    client.force_login(ops)
    # session, user, the user's time zone, permissions (2), owner check, count, page, its messages, its tool calls,
    # the header's model and approvals count
    with django_assert_max_num_queries(12):
        response = client.get(URL, {"q": "request", "tool": "calculate", "owner": "ops", "since": "2000-01-01"})
    assert response.content.decode().count('class="search-result"') == PAGE_SIZE // 2


def test_the_console_offers_the_search(client):
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/console/").content.decode()
    assert 'action="/console/search/"' in page and 'name="q"' in page
