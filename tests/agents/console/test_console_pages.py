"""Console, routing log and workflow pages: permissions on every view, live-ready markup, filters, cancel, approvals."""

import datetime
import re
import threading

import pytest
from django.utils import timezone

from agents.models import Conversation, RoutingLog, ToolApproval, Turn, TurnEvent, Workflow
from agents.turns.start import create_turn
from agents.turns.workflows import start_workflow
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
PAGES = ["/console/", "/routing/", "/workflows/"]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_requests_redirect_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response.url == f"/login/?next={url}"


@pytest.mark.parametrize("url", PAGES)
def test_a_user_without_a_role_gets_403(client, django_user_model, url):
    client.force_login(django_user_model.objects.create_user("nobody", password="a-long-test-password"))
    assert client.get(url).status_code == 403


def test_the_quality_fragment_needs_the_routing_permission_too(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("nobody", password="a-long-test-password"))
    headers = {"HX-Request": "true", "HX-Target": "quality"}
    assert client.get("/routing/", {"window": "7d"}, headers=headers).status_code == 403


def test_a_viewer_sees_no_chat_form_and_cannot_post_one(client):
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/console/").content.decode()
    assert 'ws-connect="/ws/console/"' in page and 'name="message"' not in page
    assert client.post("/console/", {"message": "What is 1 + 1?"}).status_code == 403
    assert not Turn.objects.exists()


def turn_thread(turn_id: int) -> threading.Thread:
    """The thread agents.turns.dispatch.start_in_background runs the turn in (eager Celery: the embedded default)."""
    (thread,) = [thread for thread in threading.enumerate() if thread.name == f"turn-{turn_id}"]
    return thread


def new_turn_thread(before: set[threading.Thread]) -> threading.Thread:
    """The turn thread started since `before` was taken, found without a query: while the turn writes, SQLite's
    in-memory database (shared cache, table locks) fails a read of its tables at once instead of waiting."""
    (thread,) = [t for t in threading.enumerate() if re.fullmatch(r"turn-\d+", t.name) and t not in before]
    return thread


@pytest.mark.django_db(transaction=True)  # the turn's thread reads the committed rows
def test_an_operator_starts_a_turn_from_the_console_like_the_api(client, eager_celery, demo_catalog):
    operator = make_user("operator", role="operator")
    client.force_login(operator)
    before = set(threading.enumerate())
    response = client.post("/console/", {"message": "What is 15 + 27?", "model": "toolhub"})
    new_turn_thread(before).join(timeout=60)
    turn = Turn.objects.get()
    assert response.status_code == 302 and response.url == f"/console/{turn.conversation_id}/"
    assert turn.conversation.owner == operator and turn.status == Turn.Status.DONE
    page = client.get(response.url).content.decode()
    assert f'ws-connect="/ws/console/{turn.conversation_id}/"' in page
    assert "42" in page.split(f'id="turn-{turn.id}-content"')[1].split("</div>")[0]
    routing = page.split(f'id="turn-{turn.id}-routing"')[1].split("</section>")[0]
    assert "Denied (" in routing and "calculate" in routing
    budget = page.split(f'id="turn-{turn.id}-budget"')[1]
    assert "budget-bar" in budget and "tools" in budget


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("new_conversation", [True, False], ids=["new", "existing"])
def test_the_console_answers_before_the_turn_runs_and_send_waits_for_it(
    client, eager_celery, monkeypatch, new_conversation
):
    """Eager Celery would run the turn inside the POST (3 s on the builtin model, a real model's whole answer):
    the console answers first, the page it leads to streams the turn, and its Send stays disabled meanwhile."""
    gate, ran = threading.Event(), []
    monkeypatch.setattr("agents.turns.runtime.run_turn", lambda turn_id: (gate.wait(10), ran.append(turn_id)))
    operator = make_user("operator", role="operator")
    client.force_login(operator)
    if new_conversation:
        response = client.post("/console/", {"message": "What is 15 + 27?", "model": "toolhub"})
    else:
        conversation = Conversation.objects.create(owner=operator)
        response = client.post(f"/console/{conversation.pk}/", {"message": "What is 15 + 27?"})
    turn = Turn.objects.get()
    assert response.status_code == 302 and response.url == f"/console/{turn.conversation_id}/"
    assert ran == [] and turn.status == Turn.Status.QUEUED  # answered while the turn waits at the gate
    page = client.get(response.url).content.decode()
    assert '<button type="submit" id="chat-send" aria-describedby="chat-send-why" disabled>Send</button>' in page
    assert '<p id="chat-send-why" class="muted send-why">Send waits until' in page  # says why, shown
    gate.set()
    turn_thread(turn.id).join(timeout=10)
    assert ran == [turn.id]
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE)
    page = client.get(response.url).content.decode()
    assert '<button type="submit" id="chat-send" aria-describedby="chat-send-why">Send</button>' in page
    assert '<p id="chat-send-why" class="muted send-why" hidden>' in page


def test_an_empty_chat_message_is_a_field_error(client):
    client.force_login(make_user("operator", role="operator"))
    response = client.post("/console/", {"message": "  "})
    assert response.status_code == 400 and "This field is required." in response.content.decode()


def test_only_the_owner_may_add_to_a_conversation(client):
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner, title="hello")
    create_turn(conversation, "hello")
    client.force_login(make_user("other", role="operator"))
    assert 'name="message"' not in client.get(f"/console/{conversation.pk}/").content.decode()
    assert client.post(f"/console/{conversation.pk}/", {"message": "hi"}).status_code == 403


def approval_turn(owner) -> ToolApproval:
    turn = create_turn(Conversation.objects.create(owner=owner, title="restart"), "docker restart web")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.WAITING)
    return ToolApproval.objects.create(turn=turn, tool_call_id="c1", tool_name="restart_container",
                                       arguments={"container": "web"}, risk="high",
                                       expires_at=timezone.now() + datetime.timedelta(minutes=5))  # fmt: skip


def test_a_viewer_gets_403_deciding_an_approval_and_sees_no_buttons(client):
    viewer = make_user("viewer", role="viewer")
    approval = approval_turn(make_user("owner", role="operator"))
    TurnEvent.objects.create(turn=approval.turn, sequence=1, type=TurnEvent.Type.APPROVAL_REQUIRED,
                             payload={"approval_id": approval.pk, "tool_name": "restart_container"})  # fmt: skip
    client.force_login(viewer)
    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    assert f'id="approval-{approval.pk}"' in page and 'value="approve"' not in page
    response = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"}, headers={"HX-Request": "true"})
    assert response.status_code == 403
    assert ToolApproval.objects.get(pk=approval.pk).status == "pending"


def approval_card(client, approval) -> str:
    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    return page.split(f'id="approval-{approval.pk}"')[1].split("</div>")[0]


def test_the_operator_who_started_a_turn_sees_needs_another_operator_instead_of_approve(client):
    owner = make_user("owner", role="operator")
    approval = approval_turn(owner)
    payload = {"approval_id": approval.pk, "tool_name": "restart_container", "risk": "high"}
    TurnEvent.objects.create(turn=approval.turn, sequence=1, type=TurnEvent.Type.APPROVAL_REQUIRED, payload=payload)
    client.force_login(owner)
    card = approval_card(client, approval)
    assert "Needs another operator" in card and 'value="approve"' not in card and 'value="deny"' in card
    client.force_login(make_user("second", role="operator"))
    card = approval_card(client, approval)
    assert "Needs another operator" not in card and 'value="approve"' in card and 'value="deny"' in card


def test_the_thread_shows_the_status_its_stored_events_reached_before_the_turn_row_catches_up(client):
    # The runtime stores approval_required, then (after its other calls) sets the row to waiting: a page built in
    # between must say waiting, as the live event did, or it shows a stale status that no later event corrects.
    approval = approval_turn(make_user("owner", role="operator"))
    Turn.objects.filter(pk=approval.turn_id).update(status=Turn.Status.RUNNING)
    TurnEvent.objects.create(turn=approval.turn, sequence=1, type=TurnEvent.Type.STATUS, phase="analysis",
                             payload={"message": "Consulting the steward"})  # fmt: skip
    TurnEvent.objects.create(turn=approval.turn, sequence=2, type=TurnEvent.Type.APPROVAL_REQUIRED,
                             payload={"approval_id": approval.pk, "tool_name": "restart_container"})  # fmt: skip
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    assert f'id="turn-{approval.turn_id}-status" class="turn-status status-waiting"' in page
    # A row that ended (done or failed) wins over events: a crash may end a turn without a done event.
    Turn.objects.filter(pk=approval.turn_id).update(status=Turn.Status.FAILED)
    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    assert f'id="turn-{approval.turn_id}-status" class="turn-status status-failed"' in page


def test_an_operator_decides_over_htmx_and_a_second_decision_is_409(client, eager_celery):
    approval = approval_turn(make_user("owner", role="viewer"))
    client.force_login(make_user("operator", role="operator"))
    htmx = {"HX-Request": "true"}
    Turn.objects.filter(pk=approval.turn_id).update(status=Turn.Status.DONE)  # nothing to resume in this test
    response = client.post(f"/approvals/{approval.pk}/decide", {"decision": "deny"}, headers=htmx)
    assert response.status_code == 200 and "denied" in response.content.decode()
    again = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"}, headers=htmx)
    assert again.status_code == 409 and "already denied" in again.content.decode()


def test_without_js_a_decision_comes_back_to_the_conversation(client, eager_celery):
    # The buttons a live event brings were rendered without a request, so their form carries no `next`.
    approval = approval_turn(make_user("owner", role="viewer"))
    client.force_login(make_user("operator", role="operator"))
    Turn.objects.filter(pk=approval.turn_id).update(status=Turn.Status.DONE)  # nothing to resume in this test
    response = client.post(f"/approvals/{approval.pk}/decide", {"decision": "deny"})
    assert response.status_code == 302 and response.url == f"/console/{approval.turn.conversation_id}/"
    assert ToolApproval.objects.get(pk=approval.pk).status == "denied"
    offsite = client.post(f"/approvals/{approval.pk}/decide", {"decision": "deny", "next": "https://evil.example/"})
    assert offsite.url == f"/console/{approval.turn.conversation_id}/"


def log(query, **fields) -> RoutingLog:
    values = {"decision": {"action": "answer", "domains": [], "confidence": 0.9, "phase": "", "side_query": False},
              "steward_mode": "rules"} | fields  # fmt: skip
    return RoutingLog.objects.create(query=query, **values)


def test_the_routing_log_filters_keep_their_query_string_and_htmx_gets_the_table(client):
    log("What is 15 + 27?", fallback=False)
    log(
        "list loyalty rules",
        fallback=True,
        denied=[{"name": "delete_rule", "reason": "needs a delete action"}],
        decision={"action": "list", "domains": ["loyalty"], "confidence": 0.8, "phase": "", "side_query": False},
    )
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/routing/", {"domain": "loyalty"}).content.decode()
    table = page.split('id="log-table"')[1]
    assert "list loyalty rules" in table and "15 + 27" not in table
    assert 'value="loyalty"' in page  # the filter stays filled in on a deep link
    assert "back=domain%3Dloyalty" in table  # the row link brings the filters back
    fragment = client.get("/routing/", {"fallback": "no"}, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="log-table"') and "15 + 27" in fragment and "loyalty" not in fragment
    by_tool = client.get("/routing/", {"tool": "delete_rule"}).content.decode().split('id="log-table"')[1]
    assert "list loyalty rules" in by_tool and "15 + 27" not in by_tool


def quality_section(page: str) -> str:
    return page.split('id="quality"')[1].split("</section>")[0]


def quality_row(section: str, label: str) -> list[str]:
    """The cells of one row of the quality table, tags stripped."""
    row = section.split(f'<th scope="row">{label}</th>')[1].split("</tr>")[0]
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in row.split("</td>")[:-1]]


def test_the_routing_page_shows_recommendation_quality_per_stage_for_the_window(client):
    log("two", recommended=["a", "b"], called=["a"], turn_ms=100)
    log("two, fell back", recommended=["c"], called=["c", "d"], turn_ms=100, fallback=True)
    log("still running", recommended=["x"], called=[], turn_ms=None)  # not finished: not in precision/recall
    log("single", recommended=["e"], called=["e"], turn_ms=100, two_stage=False)
    last_week = log("last week", recommended=["f"], called=["g"], turn_ms=100, two_stage=False)
    RoutingLog.objects.filter(pk=last_week.pk).update(created_at=timezone.now() - datetime.timedelta(days=3))
    client.force_login(make_user("viewer", role="viewer"))

    section = quality_section(client.get("/routing/").content.decode())
    assert "<caption>Recommendations, last 24 hours</caption>" in section
    assert quality_row(section, "All") == ["4", "3", "75 %", "75 %"]
    assert quality_row(section, "Two-stage") == ["3", "2", "67 %", "67 %"]
    assert quality_row(section, "Single-stage") == ["1", "1", "100 %", "100 %"]
    assert "<strong>25 %</strong> of 4 analyses" in section
    assert 'id="window-24h" href="?window=24h" aria-current="true"' in section

    week = quality_section(client.get("/routing/", {"window": "7d", "domain": "loyalty"}).content.decode())
    assert "<caption>Recommendations, last 7 days</caption>" in week
    assert quality_row(week, "Single-stage") == ["2", "2", "50 %", "50 %"]
    assert 'href="?window=1h&amp;domain=loyalty"' in week  # a window link keeps the filters


def test_a_window_without_finished_turns_says_so_instead_of_zero(client):
    log("still running", recommended=["x"], called=[], turn_ms=None)
    client.force_login(make_user("viewer", role="viewer"))
    section = quality_section(client.get("/routing/", {"window": "1h"}).content.decode())
    assert quality_row(section, "All") == ["1", "0", "no finished turns in this window"]
    assert quality_row(section, "Single-stage") == ["0", "0", "no finished turns in this window"]
    assert "0 %" in section  # the one analysis did not fall back: a real rate, not an empty one
    RoutingLog.objects.all().delete()
    section = quality_section(client.get("/routing/", {"window": "30d"}).content.decode())
    assert 'Steward fallback rate: <span class="muted">no analyses in this window</span>' in section
    assert "%" not in section


def test_an_invalid_window_falls_back_to_24_hours_and_the_filters_keep_the_window(client):
    client.force_login(make_user("viewer", role="viewer"))
    for value in ("forever", "", "24h&x"):
        response = client.get("/routing/", {"window": value})
        assert response.status_code == 200
        assert "<caption>Recommendations, last 24 hours</caption>" in response.content.decode()
    page = client.get("/routing/", {"window": "7d"}).content.decode()
    filters = page.split('id="routing-filters"')[1].split("</form>")[0]
    assert 'name="window" value="7d"' in filters  # filtering the log keeps the chosen window in the address


def test_htmx_gets_the_quality_section_it_targets_and_the_filters_window_out_of_band(client):
    log("two", recommended=["a"], called=["a"], turn_ms=100)
    client.force_login(make_user("viewer", role="viewer"))
    headers = {"HX-Request": "true", "HX-Target": "quality"}
    fragment = client.get("/routing/", {"window": "7d", "q": "two"}, headers=headers).content.decode()
    assert fragment.lstrip().startswith('<div class="filters quality-windows"') and 'id="log-table"' not in fragment
    assert "<caption>Recommendations, last 7 days</caption>" in fragment
    assert 'id="filters-window" hx-swap-oob="true"' in fragment and 'value="7d"' in fragment
    assert 'href="?window=30d&amp;q=two"' in fragment
    table = client.get("/routing/", {"window": "7d"}, headers={"HX-Request": "true"}).content.decode()
    assert table.lstrip().startswith('<div id="log-table"') and "Recommendations" not in table


def test_a_routing_row_opens_the_decision_bundle_denied_reasons_and_tokens(client):
    entry = log("list loyalty rules", exposed=["list_rules"], deferred=["get_rule", "update_rule"],
                denied=[{"name": "delete_rule", "reason": "needs a delete action"}], loaded_schema_tokens=300,
                deferred_listing_tokens=20, catalog_schema_tokens=5000,
                decision={"action": "list", "domains": ["loyalty"], "confidence": 0.8, "phase": "",
                          "side_query": False})  # fmt: skip
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get(f"/routing/{entry.pk}/").content.decode()
    for text in ("list_rules", "get_rule", "delete_rule", "needs a delete action", "loyalty", "4680 saved"):
        assert text in page


def make_workflow(owner, **changes) -> Workflow:
    conversation = Conversation.objects.create(owner=owner)
    workflow = start_workflow(conversation=conversation, owner=owner, kind="rule", phase="draft")
    Workflow.objects.filter(pk=workflow.pk).update(**changes)
    workflow.refresh_from_db()
    return workflow


def test_workflows_list_phase_version_and_time_to_expiry_with_filters(client):
    owner = make_user("owner", role="operator")
    active = make_workflow(owner)
    make_workflow(owner, status=Workflow.Status.CANCELLED, kind="refund")
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/workflows/").content.decode()
    assert f'id="workflow-{active.pk}"' in page and "draft" in page and "in 59" in page
    assert ">Cancel</button>" not in page  # a viewer has no cancel control
    filtered = client.get("/workflows/", {"status": "cancelled"}).content.decode().split('id="workflow-table"')[1]
    assert "refund" in filtered and f'id="workflow-{active.pk}"' not in filtered


def test_a_viewer_cannot_cancel_a_workflow(client):
    workflow = make_workflow(make_user("owner", role="operator"))
    client.force_login(make_user("viewer", role="viewer"))
    assert client.post(f"/workflows/{workflow.pk}/cancel", {"version": workflow.version}).status_code == 403
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.Status.ACTIVE


def test_an_operator_cancels_and_a_stale_version_is_409_for_htmx_and_a_message_otherwise(client):
    operator = make_user("operator", role="operator")
    workflow = make_workflow(operator)
    client.force_login(operator)
    stale = client.post(f"/workflows/{workflow.pk}/cancel", {"version": workflow.version + 5},
                        headers={"HX-Request": "true"})  # fmt: skip
    assert stale.status_code == 409 and "version" in stale.content.decode()
    response = client.post(f"/workflows/{workflow.pk}/cancel", {"version": workflow.version + 5}, follow=True)
    assert "version" in response.content.decode().split('class="flash"')[1].split("</div>")[0]
    done = client.post(
        f"/workflows/{workflow.pk}/cancel", {"version": workflow.version}, headers={"HX-Request": "true"}
    )
    assert done.status_code == 200 and "cancelled" in done.content.decode()
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.Status.CANCELLED


def test_the_overview_shows_live_counters_and_charts(client):
    log("What is 15 + 27?", turn_ms=40, steward_ms=3, catalog_schema_tokens=1000, loaded_schema_tokens=100)
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/").content.decode()
    assert 'ws-connect="/ws/overview/"' in page and 'id="overview-live"' in page
    assert "<svg" in page and "<polyline" in page and "900</span> schema tokens saved" in page


def test_the_overview_charts_have_axes_with_units_a_labelled_value_on_each_point_and_a_data_table(client):
    viewer = make_user("viewer", role="viewer")
    create_turn(Conversation.objects.create(owner=viewer), "What is 15 + 27?")
    log("What is 15 + 27?", turn_ms=240, steward_ms=12)
    log("What time is it in Paris?", turn_ms=180, steward_ms=9)
    client.force_login(viewer)
    page = client.get("/").content.decode()
    turns, latency = re.findall(r'<figure class="chart".*?</figure>', page, re.S)
    for chart, unit, ticks in ((turns, "turns per minute", ["0", "1"]), (latency, "ms", ["0", "100", "200", "300"])):
        assert chart.count('class="axis" x1="0"') == 2  # the y and x axis lines
        assert re.findall(r'<text class="tick-label" x="-6"[^>]*>([^<]*)</text>', chart) == ticks
        assert f'<text class="axis-title" x="0" y="14">{unit}</text>' in chart
        assert "<summary>Data table</summary>" in chart and '<th scope="col">' in chart
    bars = re.findall(r'<g class="point" tabindex="(-?\d)" role="img" aria-label="([^"]*)"', turns)
    assert len(bars) == 60 and [tabindex for tabindex, _ in bars].count("0") == 1 and bars[-1][0] == "0"
    assert bars[-1][1].endswith(" · 1 turn") and bars[0][1].endswith(" · 0 turns")
    assert '<text class="tick-label"' in turns and "minute (UTC)" in turns
    points = re.findall(r'<g class="point"[^>]*aria-label="([^"]*)"', latency)
    assert [point.split(" · ", 1)[1] for point in points] == [
        "turn 240 ms · steward 12 ms",
        "turn 180 ms · steward 9 ms",
    ]
    assert all(f">{point}</text>" in latency for point in points)  # the tip shown on hover and focus
    assert re.search(
        r"<tr><th scope=\"row\">[\d:]+</th><td class=\"num\">240</td><td class=\"num\">12</td></tr>", latency
    )


def test_a_turn_card_shows_decision_called_tools_and_answer_first_and_the_denied_collapsed_by_reason(client):
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner)
    turns = [create_turn(conversation, "What is 15 + 27?") for _ in range(2)]
    for turn in turns:
        log("What is 15 + 27?", turn=turn, called=["calculate"], denied=[
            {"name": "delete_rule", "reason": "outside the request's domains"},
            {"name": "transfer_points", "reason": "policy is draft, not active"},
            {"name": "update_rule", "reason": "outside the request's domains"},
        ])  # fmt: skip
        TurnEvent.objects.create(turn=turn, sequence=1, type="delta", payload={"content": "42"})
        TurnEvent.objects.create(turn=turn, sequence=2, type="tool_result",
                                 payload={"tool_name": "calculate", "content": "42"})  # fmt: skip
    client.force_login(owner)
    page = client.get(f"/console/{conversation.pk}/").content.decode()
    card = page.split(f'id="turn-{turns[0].id}"')[1].split("</article>")[0]
    order = [card.index(text) for text in ("<dt>Decision</dt>", "<dt>Called</dt>", 'class="answer"',
                                           'class="budget"', 'class="timeline"')]  # fmt: skip
    assert order == sorted(order)
    assert "<code>calculate</code>" in card.split("<dt>Called</dt>")[1].split("</dd>")[0]
    assert '<details class="denied">' in card  # collapsed: no `open`
    summary = card.split('<details class="denied">')[1].split("</summary>")[0]
    assert "Denied (3): 2 outside the request&#x27;s domains · 1 policy is draft, not active" in summary
    denied = card.split('class="denied-list" tabindex="0"')[1].split("</ul>")[0]
    assert "<code>delete_rule</code> <code>update_rule</code>" in denied.split("policy is draft")[0]
    # Each turn's landmark has its own name; each scrollable region is reachable with the keyboard.
    assert page.count('aria-label="Steward status of turn') == 2 and page.count('Steward status"') == 0
    assert re.findall(r'<pre class="result"[^>]*>', card) == [
        '<pre class="result" tabindex="0" aria-label="Result of step 2">'
    ]


@pytest.mark.django_db
def test_pages_show_times_in_the_configured_zone_with_its_abbreviation(client, settings):
    settings.TIME_ZONE = "Asia/Ho_Chi_Minh"
    ops = make_user("ops", role="operator")
    conversation = Conversation.objects.create(owner=ops, title="what time is it")
    Turn.objects.create(conversation=conversation)
    client.force_login(ops)

    page = client.get("/console/search/").content.decode()

    assert "+07" in page  # 'T' shows the zone's abbreviation next to each time
    assert "minute (Asia/Ho_Chi_Minh)" in client.get("/").content.decode()
