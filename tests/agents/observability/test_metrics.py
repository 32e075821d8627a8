"""/metrics: off without a token, 401 without the right one, and figures read from the database that survive
retention (counters never drop when old turns are removed)."""

import datetime

import pytest
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from agents.models import Conversation, ToolApproval, Turn, TurnEvent
from agents.turns.retention import apply_retention
from catalog.models import McpServer
from tests.support.builders import NOW, make_turn, make_user

pytestmark = pytest.mark.django_db
TOKEN = "scrape-token-0123456789"
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def conversation():
    return Conversation.objects.create(owner=make_user())


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", headers=SCRAPE)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_metrics_are_off_until_a_token_is_set(client):
    assert client.get("/metrics").status_code == 404


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN])
def test_a_scrape_without_the_token_gets_401_and_no_figures(client, header):
    response = client.get("/metrics", headers={"Authorization": header} if header else {})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"toolhub_" not in response.content


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_turns_routing_and_latency_counters_keep_what_retention_removed(client, conversation):
    make_turn(conversation, turn_ms=40, steward_ms=8)  # 40 days old: retention removes it
    make_turn(conversation, status=Turn.Status.FAILED, turn_ms=3000, steward_ms=30)  # old, failed, a fallback
    recent = NOW - datetime.timedelta(days=1)
    make_turn(conversation, when=recent, turn_ms=700, steward_ms=12)
    make_turn(conversation, status=Turn.Status.RUNNING, when=recent, turn_ms=None, steward_ms=20)  # not ended

    before = scrape(client)
    apply_retention(days=30)
    after = scrape(client)

    assert Turn.objects.count() == 2  # two removed, so the figures below come partly from RetentionDay
    for figures in (before, after):
        assert figures[("toolhub_turns_total", (("outcome", "done"),))] == 2
        assert figures[("toolhub_turns_total", (("outcome", "failed"),))] == 1
        assert figures[("toolhub_turns_total", (("outcome", "cancelled"),))] == 0
        assert figures[("toolhub_turns_in_progress", (("state", "running"),))] == 1
        assert figures[("toolhub_routing_requests_total", ())] == 4
        assert figures[("toolhub_routing_fallbacks_total", ())] == 1
        assert figures[("toolhub_schema_tokens_saved_total", ())] == 400
        turn = {
            labels: value for (name, labels), value in figures.items() if name == "toolhub_turn_duration_seconds_bucket"
        }
        assert turn[(("le", "0.05"),)] == 1  # 40 ms
        assert turn[(("le", "1"),)] == 2  # and 700 ms
        assert turn[(("le", "5"),)] == 3  # and 3 s
        assert turn[(("le", "+Inf"),)] == figures[("toolhub_turn_duration_seconds_count", ())] == 3
        steward = {
            labels: value
            for (name, labels), value in figures.items()
            if name == "toolhub_steward_duration_seconds_bucket"
        }
        assert steward[(("le", "0.01"),)] == 1 and steward[(("le", "0.025"),)] == 3 and steward[(("le", "0.05"),)] == 4


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_approvals_tool_calls_of_the_last_hour_and_mcp_servers(client, conversation):
    turn = make_turn(conversation, status=Turn.Status.WAITING, when=timezone.now())
    ToolApproval.objects.create(turn=turn, tool_call_id="c1", tool_name="transfer_points", risk="high",
                                expires_at=timezone.now() + datetime.timedelta(minutes=5))  # fmt: skip
    results = [("get_member", {}), ("get_member", {"is_error": True}), ("transfer_points", {"refused": True})]
    TurnEvent.objects.bulk_create(
        [
            TurnEvent(
                turn=turn, sequence=100 + i, type=TurnEvent.Type.TOOL_RESULT, payload={"tool_name": name, **flags}
            )
            for i, (name, flags) in enumerate(results)
        ]  # fmt: skip
    )
    old = TurnEvent.objects.create(turn=turn, sequence=200, type=TurnEvent.Type.TOOL_RESULT,
                                   payload={"tool_name": "get_member"})  # fmt: skip
    TurnEvent.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(hours=2))
    McpServer.objects.create(name="loyalty", command="x", status=McpServer.Status.OK)
    McpServer.objects.create(name="broken", command="x", status=McpServer.Status.ERROR)
    McpServer.objects.create(name="off", command="x", status=McpServer.Status.OK, enabled=False)

    figures = scrape(client)

    assert figures[("toolhub_approvals", (("status", "pending"),))] == 1
    assert figures[("toolhub_tool_calls_last_hour", (("outcome", "ok"), ("tool", "get_member")))] == 1
    assert figures[("toolhub_tool_calls_last_hour", (("outcome", "error"), ("tool", "get_member")))] == 1
    assert figures[("toolhub_tool_calls_last_hour", (("outcome", "error"), ("tool", "transfer_points")))] == 1
    assert figures[("toolhub_mcp_server_up", (("server", "loyalty"),))] == 1
    assert figures[("toolhub_mcp_server_up", (("server", "broken"),))] == 0
    assert ("toolhub_mcp_server_up", (("server", "off"),)) not in figures


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_thousands_of_tool_names_cannot_explode_the_series(client, conversation, monkeypatch):
    from agents.observability import metrics

    monkeypatch.setattr(metrics, "TOOL_SERIES", 3)
    turn = make_turn(conversation, status=Turn.Status.RUNNING, when=timezone.now())
    calls = {"busy": 5, "second": 4, "third": 3, "rare_1": 1, "rare_2": 1}
    TurnEvent.objects.bulk_create(
        [
            TurnEvent(turn=turn, sequence=1000 + i, type=TurnEvent.Type.TOOL_RESULT, payload={"tool_name": name})
            for i, name in enumerate(n for n, times in calls.items() for _ in range(times))
        ]  # fmt: skip
    )

    figures = scrape(client)

    tools = {dict(labels)["tool"]: value for (name, labels), value in figures.items()
             if name == "toolhub_tool_calls_last_hour"}  # fmt: skip
    assert tools == {"busy": 5, "second": 4, "third": 3, "other": 2}
