"""Policy editor: form errors, one immutable version per save (author + note), diffs, rollback, simulation."""

import re

import pytest

from agents.models import RoutingLog
from catalog.models import Domain, PolicyVersion, ToolPolicy
from catalog.policies.decision import RoutingDecision, load_catalog
from catalog.policies.versions import CallStatus, Replay, simulate_policy, snapshot, summarize_simulation
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db


def form_data(policy, **changes):
    """The editor's POST for `policy` as it is, with `changes` applied."""
    data = snapshot(policy) | {"note": "a reason", "base_version": policy.version} | changes
    post = {
        "status": data["status"],
        "operation": data["operation"],
        "risk": data["risk"],
        "domains": data["domains"],
        "workflow_phases": ", ".join(data["workflow_phases"]),
        "aliases": ", ".join(data["aliases"]),
        "note": data["note"],
        "base_version": data["base_version"],
    }
    if data["requires_confirmation"]:
        post["requires_confirmation"] = "on"
    return post


def field_block(page: str, name: str) -> str:
    """The HTML of one form field's group (label, help, errors, widget)."""
    return re.split(r'<div class="(?:field|actions)', page.split(f'field-{name}">')[1])[0]


def log_request(query, *, action="get", domains=("general",), confidence=0.9, recommended=(), called=()):
    decision = RoutingDecision(action, frozenset(domains), confidence)
    return RoutingLog.objects.create(
        query=query, decision=decision.as_dict(), recommended=list(recommended), called=list(called)
    )


@pytest.fixture
def operator_client(client):
    client.force_login(make_user("op", role="operator"))
    return client


def test_policy_list_shows_each_tools_active_policy_and_filters(operator_client):
    make_policy(make_tool("get_weather"), domains=("weather",), risk="medium", workflow_phases=["lookup"])
    make_policy(make_tool("delete_order"), domains=("shop",), operation="delete", risk="high",
                requires_confirmation=True)  # fmt: skip
    make_tool("rogue_tool")
    page = operator_client.get("/policies/").content.decode()
    for text in ("get_weather", "delete_order", "rogue_tool", "lookup", "required", "none"):
        assert text in page
    shop = operator_client.get("/policies/", {"domain": "shop"}).content.decode()
    table = shop.split('id="policy-table"')[1]
    assert "delete_order" in table and "get_weather" not in table
    fragment = operator_client.get("/policies/", {"q": "weather"}, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="policy-table"') and "<html" not in fragment
    assert "get_weather" in fragment and "delete_order" not in fragment


def test_saving_creates_a_new_active_version_with_author_and_note(operator_client):
    policy = make_policy(make_tool("get_weather"))
    response = operator_client.post(
        "/policies/get_weather/", form_data(policy, status="rejected", note="deny it for now")
    )
    assert response.status_code == 302 and response.url == "/policies/get_weather/"
    policy.refresh_from_db()
    version = policy.versions.get(number=2)
    assert (policy.status, policy.version) == ("rejected", 2)
    assert (version.author.username, version.note, version.snapshot["status"]) == ("op", "deny it for now", "rejected")
    assert policy.versions.get(number=1).snapshot["status"] == "active"  # the old version is untouched
    page = operator_client.get("/policies/get_weather/").content.decode()
    history = page.split('id="history"')[1]
    v2 = history.split('id="v2"')[1].split("</li>")[0]
    assert "active" in v2 and "deny it for now" in v2 and "op" in v2
    assert '<td class="del">active</td><td class="ins">denied</td>' in v2  # "rejected" is shown as denied
    assert "Saved version 2" in page


def test_note_is_required_and_errors_show_next_to_the_field(operator_client):
    policy = make_policy(make_tool("get_weather"))
    response = operator_client.post("/policies/get_weather/", form_data(policy, status="rejected", note=""))
    assert response.status_code == 200
    assert "This field is required." in field_block(response.content.decode(), "note")
    assert PolicyVersion.objects.filter(policy=policy).count() == 1


def test_invalid_choices_and_unconfirmed_high_risk_are_field_errors(operator_client):
    policy = make_policy(make_tool("get_weather"))
    page = operator_client.post("/policies/get_weather/", form_data(policy, operation="fly")).content.decode()
    assert "Select a valid choice" in field_block(page, "operation")
    page = operator_client.post("/policies/get_weather/", form_data(policy, risk="critical")).content.decode()
    assert "must require confirmation" in field_block(page, "requires_confirmation")
    assert policy.versions.count() == 1


def test_a_save_that_changes_nothing_is_refused(operator_client):
    policy = make_policy(make_tool("get_weather"))
    page = operator_client.post("/policies/get_weather/", form_data(policy)).content.decode()
    assert "Nothing changed" in page
    assert policy.versions.count() == 1


def test_a_save_from_a_stale_version_is_refused(operator_client):
    policy = make_policy(make_tool("get_weather"))
    stale = form_data(policy, risk="medium")
    operator_client.post("/policies/get_weather/", form_data(policy, aliases=["forecast"]))
    page = operator_client.post("/policies/get_weather/", stale).content.decode()
    assert "changed to version 2 since you opened it" in page
    policy.refresh_from_db()
    assert (policy.version, policy.risk, policy.aliases) == (2, "low", ["forecast"])


def test_writing_the_first_policy_of_an_unpolicied_tool(operator_client):
    make_tool("rogue_tool")
    Domain.objects.create(name="shop", title="Shop")
    data = {"status": "active", "operation": "read", "risk": "low", "domains": ["shop"], "note": "first policy",
            "base_version": 0}  # fmt: skip
    assert operator_client.post("/policies/rogue_tool/", data).status_code == 302
    policy = ToolPolicy.objects.get(tool__name="rogue_tool")
    assert (policy.status, policy.version, snapshot(policy)["domains"]) == ("active", 1, ["shop"])
    assert policy.versions.get().author.username == "op"


def test_rollback_asks_to_confirm_then_moves_the_pointer(operator_client):
    policy = make_policy(make_tool("get_weather"))
    operator_client.post("/policies/get_weather/", form_data(policy, risk="medium", note="v2"))
    confirm = operator_client.get("/policies/get_weather/rollback/1/").content.decode()
    assert "Confirm rollback to v1" in confirm
    assert '<td class="del">medium</td><td class="ins">low</td>' in confirm
    policy.refresh_from_db()
    assert (policy.version, policy.risk) == (2, "medium")  # the GET changed nothing
    inline = operator_client.get("/policies/get_weather/rollback/1/", headers={"HX-Request": "true"}).content.decode()
    assert inline.lstrip().startswith('<section id="rollback-confirm"') and "<html" not in inline
    response = operator_client.post("/policies/get_weather/rollback/1/")
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.version, policy.risk, policy.versions.count()) == (1, "low", 2)
    history = operator_client.get("/policies/get_weather/").content.decode().split('id="history"')[1]
    assert '<span class="badge">current</span>' in history.split('id="v1"')[1].split("</li>")[0]
    assert "roll back to v2" in history


def test_rollback_to_a_missing_version_is_404(operator_client):
    make_policy(make_tool("get_weather"))
    assert operator_client.get("/policies/get_weather/rollback/9/").status_code == 404
    assert operator_client.post("/policies/get_weather/rollback/9/").status_code == 404


def test_simulate_policy_reports_added_and_removed_tools_and_token_change():
    weather = make_policy(make_tool("get_weather"), domains=("general",))
    make_policy(make_tool("create_order", description="Create an order."), domains=("shop",), operation="create",
                status=ToolPolicy.Status.DRAFT)  # fmt: skip
    catalog = load_catalog()
    replays = [
        Replay(RoutingDecision("get", frozenset({"general"}), 0.9)),
        Replay(RoutingDecision("create", frozenset({"shop"}), 1.0)),
        Replay(RoutingDecision("create", frozenset({"shop"}), 0.2)),
    ]
    deny_weather = snapshot(weather) | {"status": "rejected"}
    results = simulate_policy("get_weather", deny_weather, replays, catalog=catalog)
    tokens = weather.tool.schema_tokens
    assert [r.loaded_removed for r in results] == [("get_weather",)] * 3  # read-only: in every bundle before
    assert [r.token_change for r in results] == [-tokens] * 3
    order_policy = ToolPolicy.objects.get(tool__name="create_order")
    approve = snapshot(order_policy) | {"status": "active"}
    results = simulate_policy("create_order", approve, replays, catalog=catalog)
    order_tokens = order_policy.tool.schema_tokens
    assert [r.loaded_added for r in results] == [(), ("create_order",), ()]
    assert [r.token_change for r in results] == [0, order_tokens, 0]
    assert [r.changed for r in results] == [False, True, False]


def test_simulate_policy_sees_deferred_tools_leave_the_archive():
    mcp = make_policy(make_tool("list_vouchers", is_mcp=True, source="mcp"), domains=("loyalty",))
    results = simulate_policy(
        "list_vouchers", snapshot(mcp) | {"status": "rejected"}, [Replay(RoutingDecision("list", frozenset(), 0.5))],
        catalog=load_catalog(),
    )  # fmt: skip
    [result] = results
    assert result.deferred_removed == ("list_vouchers",) and not result.loaded_removed
    assert result.tokens_after < result.tokens_before


def test_simulate_policy_reports_calls_that_would_now_wait_for_approval():
    """The issue's case: a draft that only sets requires_confirmation changes no bundle, but the calls."""
    order = make_policy(make_tool("create_order"), domains=("shop",), operation="create", risk="medium")
    make_policy(make_tool("get_weather"))
    replays = [
        Replay(RoutingDecision("create", frozenset({"shop"}), 1.0), called=("create_order",)),
        Replay(RoutingDecision("create", frozenset({"shop"}), 1.0), called=()),  # offered, never called
        Replay(RoutingDecision("get", frozenset({"general"}), 0.9), called=("get_weather",)),
    ]
    confirm = snapshot(order) | {"requires_confirmation": True}
    results = simulate_policy("create_order", confirm, replays, catalog=load_catalog())
    assert [r.calls_needing_approval for r in results] == [("create_order",), (), ()]
    assert [r.changed for r in results] == [True, False, False]
    assert not any(r.loaded_added or r.loaded_removed or r.token_change for r in results)
    [change] = results[0].call_changes
    assert (change.name, change.before, change.after) == ("create_order", CallStatus.RUNS, CallStatus.NEEDS_APPROVAL)
    summary = summarize_simulation(results)
    assert (summary.requests, summary.changed, summary.calls_needing_approval) == (3, 1, 1)
    # And back: the confirmation dropped again (on a low-risk tool) frees the call.
    order.requires_confirmation = True
    order.save()
    freed = simulate_policy("create_order", confirm | {"requires_confirmation": False}, replays, catalog=load_catalog())
    assert [r.calls_no_longer_needing_approval for r in freed] == [("create_order",), (), ()]


def test_simulate_policy_reports_calls_that_would_now_be_denied_or_allowed_again():
    weather = make_policy(make_tool("get_weather"), domains=("general",))
    replays = [
        Replay(RoutingDecision("get", frozenset({"general"}), 0.9), called=("get_weather",)),
        Replay(RoutingDecision("get", frozenset({"general"}), 0.9), called=("get_weather", "gone_tool")),
    ]
    high_risk = snapshot(weather) | {"risk": "critical"}  # without confirmation: denied everywhere
    results = simulate_policy("get_weather", high_risk, replays, catalog=load_catalog())
    assert [r.calls_denied for r in results] == [("get_weather",), ("get_weather",)]
    assert [r.loaded_removed for r in results] == [("get_weather",)] * 2
    summary = summarize_simulation(results)
    assert (summary.changed, summary.calls_denied, summary.tools_removed) == (2, 2, 2)
    weather.status = ToolPolicy.Status.REJECTED
    weather.save()
    allowed = simulate_policy("get_weather", snapshot(weather) | {"status": "active"}, replays, catalog=load_catalog())
    assert [r.calls_allowed for r in allowed] == [("get_weather",), ("get_weather",)]
    assert [r.loaded_added for r in allowed] == [("get_weather",)] * 2


def test_simulate_policy_reports_tools_moving_between_loaded_and_deferred(settings):
    """Two tools over the bundle's token cap: the one of the request's domain is loaded, the other deferred."""
    first = make_policy(make_tool("find_order", description="Find an order."), domains=("shop",))
    make_policy(make_tool("find_invoice", description="Find an invoice."), domains=("billing",))
    settings.TOOLHUB_MAX_BUNDLE_SCHEMA_TOKENS = first.tool.schema_tokens + 1
    replays = [Replay(RoutingDecision("get", frozenset({"shop"}), 0.9))]
    results = simulate_policy("find_order", snapshot(first) | {"domains": ["sales"]}, replays, catalog=load_catalog())
    [result] = results
    assert (result.now_deferred, result.now_loaded) == (("find_order",), ("find_invoice",))
    assert not (result.loaded_added or result.loaded_removed or result.deferred_added or result.deferred_removed)
    assert result.changed
    summary = summarize_simulation(results)
    assert (summary.tools_now_loaded, summary.tools_now_deferred, summary.tools_added) == (1, 1, 0)


def test_simulate_view_replays_the_last_logged_requests_under_the_draft(operator_client):
    weather = make_policy(make_tool("get_weather"))
    log_request("old request, beyond N")
    log_request("weather in Paris")
    log_request("weather in Hanoi")
    data = form_data(weather, status="rejected", note="") | {"replay": 2}
    response = operator_client.post("/policies/get_weather/simulate", data, headers={"HX-Request": "true"})
    page = response.content.decode()
    assert response.status_code == 200 and "<html" not in page
    assert page.lstrip().startswith('<section id="simulation"')
    assert "weather in Paris" in page and "weather in Hanoi" in page and "old request" not in page
    tokens = weather.tool.schema_tokens
    assert "2 of 2 requests would change" in page and f"total token change −{2 * tokens}" in page
    assert f"({'−'}{tokens})" in page and "removed get_weather (loaded)" in page
    assert "<dt>Tools removed</dt><dd>2</dd>" in page
    assert '<td class="del">active</td><td class="ins">denied</td>' in page  # the draft's diff to the active policy
    weather.refresh_from_db()
    assert (weather.status, weather.versions.count()) == ("active", 1)  # simulating saves nothing


def test_simulating_a_confirmation_lists_the_calls_that_would_wait_for_approval(operator_client):
    order = make_policy(make_tool("create_order"), domains=("shop",), operation="create", risk="medium")
    log_request("order two boxes", action="create", domains=("shop",), confidence=1.0, called=["create_order"])
    log_request("order a box", action="create", domains=("shop",), confidence=1.0, called=["create_order"])
    log_request("what can I order", action="get", domains=("shop",))
    data = form_data(order, requires_confirmation=True, note="")
    page = operator_client.post(
        "/policies/create_order/simulate", data, headers={"HX-Request": "true"}
    ).content.decode()
    assert "2 of 3 requests would change · total token change 0." in page
    assert "<dt>Calls that would wait for approval</dt><dd>2</dd>" in page
    assert "<dt>Calls that would be denied</dt><dd>0</dd>" in page and "<dt>Tools added</dt><dd>0</dd>" in page
    rows = page.split('<table class="sim">')[1].split("<tbody>")[1].split("<tr")[1:]
    assert [("create_order: runs → <strong>needs approval</strong>" in row) for row in rows] == [False, True, True]
    assert 'class="changed"' not in rows[0] and "none" in rows[0]  # the newest log first: it called nothing


def test_simulate_shows_the_drafts_errors_and_works_without_htmx(operator_client):
    weather = make_policy(make_tool("get_weather"))
    page = operator_client.post("/policies/get_weather/simulate", form_data(weather, risk="nope")).content.decode()
    assert "<html" in page and "The draft is not valid" in page and "risk" in page


def test_viewer_sees_the_policy_and_history_but_no_edit_controls(client):
    make_policy(make_tool("get_weather"))
    client.force_login(make_user("watcher", role="viewer"))
    page = client.get("/policies/get_weather/").content.decode()
    assert "History" in page and "v1" in page
    for control in ("Save new version", "Simulate", "roll back", 'name="note"', '<form method="post" action="/pol'):
        assert control not in page
    assert client.get("/policies/get_weather/rollback/1/").status_code == 403
