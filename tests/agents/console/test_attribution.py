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
