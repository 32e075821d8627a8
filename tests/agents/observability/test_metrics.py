"""/metrics: off without a token, 401 without the right one, and figures read from the database that survive
retention (counters never drop when old turns are removed); the last hour's turns by channel, tool calls by server,
approvals decided and tokens by model profile; labels from MCP servers bounded; PostgreSQL's connections.
The broker's turn queue: tests/agents/observability/test_broker_metrics.py."""

import datetime

import pytest
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from agents.models import Conversation, Message, ModelProfile, ToolApproval, Turn, TurnEvent, default_profile
from agents.turns.lifecycle import spent
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
    builtin = ("server", "")  # no MCP server serves them
    assert figures[("toolhub_tool_calls_last_hour", (("outcome", "ok"), builtin, ("tool", "get_member")))] == 1
    assert figures[("toolhub_tool_calls_last_hour", (("outcome", "error"), builtin, ("tool", "get_member")))] == 1
    assert figures[("toolhub_tool_calls_last_hour", (("outcome", "error"), builtin, ("tool", "transfer_points")))] == 1
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


def family(figures: dict, name: str) -> dict[tuple, float]:
    return {labels: value for (sample, labels), value in figures.items() if sample == name}


def ended_turn(conversation, status=Turn.Status.DONE, *, ago=datetime.timedelta(minutes=5)) -> Turn:
    return Turn.objects.create(conversation=conversation, status=status, finished_at=timezone.now() - ago)


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_turns_of_the_last_hour_by_channel_and_outcome(client):
    owner = make_user()
    console, api, mcp = (Conversation.objects.create(owner=owner, channel=channel) for channel in Conversation.Channel)
    ended_turn(console)
    ended_turn(console, Turn.Status.FAILED)
    ended_turn(api)
    ended_turn(api)
    ended_turn(mcp, Turn.Status.CANCELLED)
    ended_turn(mcp, ago=datetime.timedelta(hours=2))  # before the hour
    Turn.objects.create(conversation=mcp, status=Turn.Status.RUNNING)  # not ended

    turns = family(scrape(client), "toolhub_turns_last_hour")

    assert len(turns) == 9  # every channel and outcome, zeros included: a fixed set of series
    assert turns[(("channel", "console"), ("outcome", "done"))] == 1
    assert turns[(("channel", "console"), ("outcome", "failed"))] == 1
    assert turns[(("channel", "api"), ("outcome", "done"))] == 2
    assert turns[(("channel", "mcp"), ("outcome", "cancelled"))] == 1
    assert turns[(("channel", "mcp"), ("outcome", "done"))] == 0


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_approvals_decided_in_the_last_hour_by_decision(client, conversation):
    turn = make_turn(conversation, status=Turn.Status.WAITING, when=timezone.now())
    now = timezone.now()
    decided = [("approved", now), ("approved", now), ("denied", now), ("expired", now - datetime.timedelta(hours=3))]
    ToolApproval.objects.bulk_create(
        [
            ToolApproval(
                turn=turn,
                tool_call_id=f"c{i}",
                tool_name="transfer_points",
                risk="high",
                status=status,
                decided_at=at,
                expires_at=now,
            )
            for i, (status, at) in enumerate(decided)
        ]  # fmt: skip
    )
    ToolApproval.objects.create(turn=turn, tool_call_id="waiting", tool_name="transfer_points", risk="high",
                                expires_at=now + datetime.timedelta(minutes=5))  # fmt: skip

    figures = scrape(client)

    assert family(figures, "toolhub_approvals_decided_last_hour") == {
        (("decision", "approved"),): 2, (("decision", "denied"),): 1, (("decision", "expired"),): 0,
        (("decision", "cancelled"),): 0,
    }  # fmt: skip
    assert figures[("toolhub_approvals", (("status", "pending"),))] == 1


def tool_results(turn, calls: dict[str, int]) -> None:
    TurnEvent.objects.bulk_create(
        [
            TurnEvent(turn=turn, sequence=1000 + i, type=TurnEvent.Type.TOOL_RESULT, payload={"tool_name": name})
            for i, name in enumerate(n for n, times in calls.items() for _ in range(times))
        ]  # fmt: skip
    )


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_tool_calls_name_their_mcp_server_and_quiet_servers_share_other(client, conversation, monkeypatch):
    from agents.observability import metrics

    monkeypatch.setattr(metrics, "TOOL_SERIES", 2)
    monkeypatch.setattr(metrics, "SERVER_SERIES", 1)
    McpServer.objects.create(name="loyalty", command="x", status=McpServer.Status.OK, tool_names=["award", "refund"])
    McpServer.objects.create(name="crm", command="x", status=McpServer.Status.OK, tool_names=["find_customer"])
    turn = make_turn(conversation, status=Turn.Status.RUNNING, when=timezone.now())
    tool_results(turn, {"award": 5, "calculator": 4, "find_customer": 3, "refund": 1})

    calls = family(scrape(client), "toolhub_tool_calls_last_hour")

    assert {tuple(value for _, value in labels): count for labels, count in calls.items()} == {
        ("ok", "loyalty", "award"): 5,  # (outcome, server, tool)
        ("ok", "", "calculator"): 4,  # builtin: no server
        ("ok", "loyalty", "other"): 1,  # refund: past the busiest tools, on the busiest server
        ("ok", "other", "other"): 3,  # find_customer: past both
    }


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_hundreds_of_tools_on_dozens_of_servers_give_a_bounded_number_of_series(client, conversation, monkeypatch):
    from agents.observability import metrics

    monkeypatch.setattr(metrics, "TOOL_SERIES", 5)
    monkeypatch.setattr(metrics, "SERVER_SERIES", 3)
    McpServer.objects.bulk_create(
        [
            McpServer(name=f"server-{s}", prefix=f"s{s}", command="x", tool_names=[f"s{s}_tool_{t}" for t in range(10)])
            for s in range(30)
        ]  # fmt: skip
    )
    turn = make_turn(conversation, status=Turn.Status.RUNNING, when=timezone.now())
    tool_results(turn, {f"s{s}_tool_{t}": 1 + (s * t) % 4 for s in range(30) for t in range(10)})
    TurnEvent.objects.bulk_create(  # and a failed call of every server's first tool
        [TurnEvent(turn=turn, sequence=5000 + s, type=TurnEvent.Type.TOOL_RESULT,
                   payload={"tool_name": f"s{s}_tool_0", "is_error": True}) for s in range(30)]
    )  # fmt: skip

    figures = scrape(client)

    calls = family(figures, "toolhub_tool_calls_last_hour")
    assert len(calls) <= 2 * (5 + 3 + 2)
    assert len({dict(labels)["server"] for labels in calls}) <= 3 + 1
    assert sum(calls.values()) == TurnEvent.objects.filter(type=TurnEvent.Type.TOOL_RESULT).count()
    assert len(family(figures, "toolhub_mcp_server_up")) == 30  # one per enabled server: administrators add them


def budget_event(turn, sequence: int, profile: str, *, memory: int) -> TurnEvent:
    payload = {"system": 100, "tools": 50, "knowledge": 10, "memory": memory, "reserve": 2048, "window": 8192,
               "free": 5000, "profile": profile}  # fmt: skip
    return TurnEvent(turn=turn, sequence=sequence, type=TurnEvent.Type.ROUTING, phase="budget", payload=payload)


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_tokens_of_the_last_hour_by_model_profile_prompt_and_completion(client):
    owner = make_user()
    big = ModelProfile.objects.create(name="big-32k", context_window=32768, max_output_tokens=1024,
                                      reserved_result_tokens=1024)  # fmt: skip
    on_big = Conversation.objects.create(owner=owner, model_profile=big)
    on_default = Conversation.objects.create(owner=owner)
    default = default_profile().name
    two_steps = Turn.objects.create(conversation=on_big, status=Turn.Status.DONE)
    one_step = Turn.objects.create(conversation=on_default, status=Turn.Status.DONE)
    old = Turn.objects.create(conversation=on_big, status=Turn.Status.DONE)
    Turn.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(hours=2))
    TurnEvent.objects.bulk_create([
        budget_event(two_steps, 1, big.name, memory=40), budget_event(two_steps, 2, big.name, memory=90),
        budget_event(one_step, 1, default, memory=20), budget_event(old, 1, big.name, memory=1000),
    ])  # fmt: skip
    Message.objects.bulk_create([
        Message(conversation=on_big, turn=two_steps, role="user", content="q", tokens=5),
        Message(conversation=on_big, turn=two_steps, role="assistant", tokens=30),
        Message(conversation=on_big, turn=two_steps, role="assistant", tokens=12),
        Message(conversation=on_default, turn=one_step, role="assistant", tokens=7),
        Message(conversation=on_big, turn=old, role="assistant", tokens=500),
    ])  # fmt: skip
    Turn.objects.update(**spent())  # what ending them stores (agents/turns/lifecycle.py)

    tokens = family(scrape(client), "toolhub_tokens_last_hour")

    assert tokens == {
        (("kind", "prompt"), ("profile", "big-32k")): (160 + 40) + (160 + 90),  # each model call's prompt
        (("kind", "completion"), ("profile", "big-32k")): 30 + 12,
        (("kind", "prompt"), ("profile", default)): 160 + 20,
        (("kind", "completion"), ("profile", default)): 7,
    }


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_model_profiles_past_the_busiest_share_other(client, monkeypatch):
    from agents.observability import metrics

    monkeypatch.setattr(metrics, "PROFILE_SERIES", 1)
    owner = make_user()
    for name, memory in (("busy", 500), ("quiet", 10), ("quieter", 5)):
        profile = ModelProfile.objects.create(name=name, context_window=8192, max_output_tokens=1024,
                                              reserved_result_tokens=1024)  # fmt: skip
        conversation = Conversation.objects.create(owner=owner, model_profile=profile)
        turn = Turn.objects.create(conversation=conversation, status=Turn.Status.DONE)
        budget_event(turn, 1, name, memory=memory).save()
    Turn.objects.update(**spent())

    tokens = family(scrape(client), "toolhub_tokens_last_hour")

    assert tokens == {(("kind", "prompt"), ("profile", "busy")): 660, (("kind", "prompt"), ("profile", "other")): 335}


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_database_connections_are_not_exported_on_sqlite(client):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the embedded default's database: PostgreSQL's figures are the next test's")
    figures = scrape(client)

    assert not family(figures, "toolhub_database_connections")
    assert not family(figures, "toolhub_database_connections_max")


@pytest.mark.postgres  # pg_stat_activity: PostgreSQL's own view of the connections to toolhub's database
@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_database_connections_by_state_from_postgresql(client):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        (maximum,) = cursor.fetchone()

    figures = scrape(client)

    connections = family(figures, "toolhub_database_connections")
    assert {dict(labels)["state"] for labels in connections} >= {"active", "idle", "idle in transaction"}
    assert connections[(("state", "active"),)] >= 1  # the scrape's own query
    assert figures[("toolhub_database_connections_max", ())] == int(maximum)
