"""Who started what: a conversation records its channel and API key, the pages say it, the search filters on it."""

import json

import pytest

from agents.access.api_keys import create_api_key
from agents.console.turn_search import TurnFilters, search_turns, source
from agents.models import Conversation, Turn
from agents.openai_api import views as api_views
from agents.openai_api.views import open_turn, parse_request
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
ASK = {"model": "toolhub", "messages": [{"role": "user", "content": "what is 2 + 2?"}]}


def test_an_api_turn_records_the_channel_and_the_key_it_came_with():
    owner = make_user("ci", role="operator")
    api_key, _ = create_api_key(user=owner, name="ci-bot")

    turn = open_turn(owner, parse_request(json.dumps(ASK).encode()), api_key=api_key)

    conversation = turn.conversation
    assert (conversation.channel, conversation.api_key, conversation.api_key_name) == ("api", api_key, "ci-bot")
    assert source(conversation) == "API, key ci-bot"


def test_the_chat_endpoint_hands_the_requests_key_to_the_turn(client, monkeypatch):
    owner = make_user("ci", role="operator")
    api_key, secret = create_api_key(user=owner, name="ci-bot")
    handed = {}

    def start_turn(user, request, *, api_key=None):
        handed.update(user=user, api_key=api_key)
        raise api_views.ApiError(418, "stop here")

    monkeypatch.setattr(api_views, "start_turn", start_turn)
    response = client.post("/v1/chat/completions", data=json.dumps(ASK), content_type="application/json",
                           headers={"Authorization": f"Bearer {secret}"})  # fmt: skip

    assert response.status_code == 418
    assert handed == {"user": owner, "api_key": api_key}


def test_search_filters_by_channel_and_key_and_the_pages_say_where_a_turn_came_from(client):
    ops = make_user("ops", role="operator")
    api_key, _ = create_api_key(user=ops, name="ci-bot")
    console = Turn.objects.create(conversation=Conversation.objects.create(owner=ops, title="from the console"))
    api = Turn.objects.create(conversation=Conversation.objects.create(
        owner=ops, title="from the API", channel="api", api_key=api_key, api_key_name="ci-bot"))  # fmt: skip
    mcp = Turn.objects.create(conversation=Conversation.objects.create(
        owner=ops, title="MCP call: x", channel="mcp", api_key=api_key, api_key_name="ci-bot"))  # fmt: skip

    assert list(search_turns(TurnFilters(channel="api")).values_list("pk", flat=True)) == [api.pk]
    assert list(search_turns(TurnFilters(api_key="CI-BOT")).values_list("pk", flat=True)) == [mcp.pk, api.pk]
    assert list(search_turns(TurnFilters(channel="console")).values_list("pk", flat=True)) == [console.pk]

    client.force_login(ops)
    page = client.get("/console/search/", {"channel": "mcp"}).content.decode()
    assert "MCP, key ci-bot" in page and "from the API" not in page
    conversation = client.get(f"/console/{api.conversation_id}/").content.decode()
    assert "through the API with the API key <strong>ci-bot</strong>" in conversation
    refused = client.get("/console/search/", {"channel": "fax"})
    assert refused.status_code == 400 and "not one of the available choices" in refused.content.decode()


def ask_with(**fields) -> dict:
    return parse_request(json.dumps(ASK | fields).encode())


def test_an_api_requests_user_and_metadata_are_kept_shown_inert_and_searchable(client):
    owner = make_user("ci", role="operator")
    api_key, _ = create_api_key(user=owner, name="ci-bot")
    tagged = open_turn(owner, ask_with(user="agent-7", metadata={"ticket": "LOY-42", "note": "<b>bold</b>"}),
                       api_key=api_key)  # fmt: skip
    plain = open_turn(owner, ask_with(), api_key=api_key)
    conversation = tagged.conversation
    assert (conversation.end_user, conversation.metadata) == ("agent-7", {"ticket": "LOY-42", "note": "<b>bold</b>"})
    assert (plain.conversation.end_user, plain.conversation.metadata) == ("", {})

    assert [turn.pk for turn in search_turns(TurnFilters(end_user="AGENT-7"))] == [tagged.pk]
    assert [turn.pk for turn in search_turns(TurnFilters(tag=("ticket", "LOY-42")))] == [tagged.pk]
    assert not search_turns(TurnFilters(tag=("ticket", "LOY-4"))).exists()
    client.force_login(owner)
    page = client.get(f"/console/{conversation.pk}/").content.decode()
    assert "for the user <strong>agent-7</strong>" in page and "<code>note=&lt;b&gt;bold&lt;/b&gt;</code>" in page
    assert 'href="/console/search/?tag=ticket%3DLOY-42"' in page
    found = client.get("/console/search/", {"tag": "ticket=LOY-42", "end_user": "agent-7"}).content.decode()
    assert f"/console/{conversation.pk}/#turn-{tagged.pk}" in found
    assert f"/console/{plain.conversation_id}/" not in found
    refused = client.get("/console/search/", {"tag": "LOY-42"})
    assert refused.status_code == 400 and "key=value" in refused.content.decode()


@pytest.mark.parametrize(
    "fields,said",
    [
        ({"user": "u" * 257}, "at most 256"),
        ({"user": 7}, "user must be a string"),
        ({"user": "a\x00b"}, "NUL byte"),  # refused before parsing (body_limits)
        ({"user": "a\x1bb"}, "control character"),
        ({"metadata": ["ticket"]}, "metadata must be an object"),
        ({"metadata": {f"k{n}": "v" for n in range(17)}}, "at most 16"),
        ({"metadata": {"k" * 65: "v"}}, "at most 64"),
        ({"metadata": {"ticket": "v" * 513}}, "at most 512"),
        ({"metadata": {"ticket": 42}}, "must be a string"),
        ({"metadata": {"tick\net": "v"}}, "control character"),
        ({"metadata": {"": "v"}}, "key is empty"),
    ],
)
def test_a_bad_user_or_metadata_is_a_400_naming_the_field(client, fields, said):
    owner = make_user("ci", role="operator")
    _, secret = create_api_key(user=owner, name="ci-bot")
    response = client.post("/v1/chat/completions", data=json.dumps(ASK | fields), content_type="application/json",
                           headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
    error = response.json()["error"]
    assert response.status_code == 400 and said in error["message"] and error["param"] in ("user", "metadata")
    assert not Conversation.objects.exists()


@pytest.mark.postgres  # the tag search reads a JSON key as text: PostgreSQL's ->> where SQLite has JSON_EXTRACT
def test_user_and_metadata_on_postgresql_too(client):
    test_an_api_requests_user_and_metadata_are_kept_shown_inert_and_searchable(client)
