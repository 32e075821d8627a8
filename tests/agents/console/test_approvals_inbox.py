"""The approvals inbox (/approvals/), a card's deadline, Deny with a reason, and an approval closed by a cancel."""

import datetime

import pytest
from django.utils import timezone

from agents.console.approval_inbox import waiting_count
from agents.models import Conversation, ToolApproval, Turn, TurnEvent
from agents.turns.cancellation import cancel_turn
from agents.turns.start import create_turn
from catalog.models import PolicyChangeRequest
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def waiting_call(owner, *, title="restart web", minutes=5, risk="high") -> ToolApproval:
    """A turn of `owner` waiting on a restart_container call, with its approval_required event."""
    turn = create_turn(Conversation.objects.create(owner=owner, title=title), "docker restart web")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.WAITING)
    approval = ToolApproval.objects.create(turn=turn, tool_call_id="c1", tool_name="restart_container",
                                           arguments={"container": "web"}, risk=risk,
                                           expires_at=timezone.now() + datetime.timedelta(minutes=minutes))  # fmt: skip
    TurnEvent.objects.create(turn=turn, sequence=1, type=TurnEvent.Type.APPROVAL_REQUIRED, phase="approval_required",
                             payload={"approval_id": approval.pk, "tool_name": "restart_container", "risk": risk,
                                      "arguments": {"container": "web"},
                                      "expires_at": approval.expires_at.isoformat()})  # fmt: skip
    return approval


def pending_change(requester) -> PolicyChangeRequest:
    policy = make_policy(make_tool("get_weather"))
    return PolicyChangeRequest.objects.create(tool=policy.tool, draft={}, base_version=policy.version,
                                              reasons=["lowers the risk from high to low"], note="too strict",
                                              requested_by=requester)  # fmt: skip


def inbox_item(page: str, approval: ToolApproval) -> str:
    return page.split(f'id="inbox-approval-{approval.pk}"')[1].split("</li>")[0]


def test_the_inbox_lists_each_waiting_call_with_who_where_and_its_deadline(client):
    soon = waiting_call(make_user("alice", role="operator"), title="restart web", minutes=2)
    later = waiting_call(make_user("bob", role="operator"), title="restart db", minutes=4)
    expired = waiting_call(make_user("carol", role="operator"), minutes=-1)  # its timeout task denies it
    decided = waiting_call(make_user("dave", role="operator"))
    ToolApproval.objects.filter(pk=decided.pk).update(status=ToolApproval.Status.DENIED)
    client.force_login(make_user("second", role="operator"))

    page = client.get("/approvals/").content.decode()

    assert page.index(f"inbox-approval-{soon.pk}") < page.index(f"inbox-approval-{later.pk}")  # soonest first
    assert f"inbox-approval-{expired.pk}" not in page and f"inbox-approval-{decided.pk}" not in page
    item = inbox_item(page, soon)
    assert "<code>restart_container</code>({&quot;container&quot;: &quot;web&quot;})" in item and "risk high" in item
    assert "started by alice" in item and f'href="/console/{soon.turn.conversation_id}/#turn-{soon.turn_id}"' in item
    local = timezone.localtime(soon.expires_at)
    assert f'expires at <time datetime="{local.isoformat()}"' in item
    assert local.strftime("%H:%M:%S") in item and "data-countdown=" in item and "in 1\xa0minute" in item
    assert 'value="approve"' in item and 'value="deny"' in item and 'name="reason"' in item
    assert 'id="tool-call-count">2<' in page


def test_whoever_started_the_turn_sees_needs_another_operator_in_the_inbox(client):
    alice = make_user("alice", role="operator")
    approval = waiting_call(alice)
    client.force_login(alice)
    item = inbox_item(client.get("/approvals/").content.decode(), approval)
    assert "Needs another operator" in item and 'value="approve"' not in item and 'value="deny"' in item
    response = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"}, headers=HTMX)
    assert response.status_code == 403 and ToolApproval.objects.get(pk=approval.pk).status == "pending"


def test_the_inbox_lists_pending_policy_changes_and_deciding_one_comes_back_to_it(client):
    alice, bob = make_user("alice", role="operator"), make_user("bob", role="operator")
    change = pending_change(alice)
    client.force_login(alice)
    item = client.get("/approvals/").content.decode().split(f'id="inbox-change-{change.pk}"')[1].split("</li>")[0]
    assert "Policy of get_weather" in item and "asked by alice" in item and "lowers the risk from high to low" in item
    assert "Needs another operator" in item and 'value="approve"' not in item and 'value="reject"' in item
    client.force_login(bob)
    item = client.get("/approvals/").content.decode().split(f'id="inbox-change-{change.pk}"')[1].split("</li>")[0]
    assert 'value="approve"' in item and 'name="next" value="/approvals/"' in item
    response = client.post(f"/policies/get_weather/changes/{change.pk}/", {"decision": "reject", "next": "/approvals/"})
    assert response.status_code == 302 and response.url == "/approvals/"
    assert PolicyChangeRequest.objects.get(pk=change.pk).status == "rejected"
    offsite = client.post(
        f"/policies/get_weather/changes/{change.pk}/", {"decision": "x", "next": "https://evil.example/"}
    )
    assert offsite.url == "/policies/get_weather/"


def test_a_viewer_sees_the_inbox_without_controls_and_htmx_gets_only_the_list(client):
    approval = waiting_call(make_user("alice", role="operator"))
    pending_change(make_user("bob", role="operator"))
    client.force_login(make_user("watcher", role="viewer"))
    page = client.get("/approvals/").content.decode()
    assert f"inbox-approval-{approval.pk}" in page and 'value="deny"' not in page and 'value="reject"' not in page
    assert "Approving or denying needs the operator role." in page
    assert "Approving or rejecting a policy change needs the operator role." in page
    fragment = client.get("/approvals/", headers=HTMX).content.decode()
    assert '<div id="inbox"' in fragment and "<html" not in fragment


def test_the_navigation_counts_what_waits_and_the_overview_card_links_to_the_inbox(client):
    operator = make_user("second", role="operator")
    waiting_call(make_user("alice", role="operator"))
    pending_change(make_user("bob", role="operator"))
    assert waiting_count(operator) == 2
    client.force_login(operator)
    page = client.get("/").content.decode()
    assert '<a href="/approvals/">Approvals <span class="badge nav-count" id="nav-count-approvals">' in page
    assert '>2<span class="visually-hidden"> waiting)' in page
    card = page.split('id="waiting-card"')[0].rsplit("<a ", 1)[1]
    assert 'href="/approvals/"' in card
    assert 'href="/approvals/#policy-change-approvals"' in page
    ToolApproval.objects.update(status=ToolApproval.Status.APPROVED)
    PolicyChangeRequest.objects.update(status=PolicyChangeRequest.Status.REJECTED)
    assert "nav-count-approvals" not in client.get("/").content.decode()  # nothing waits: no badge


def test_the_conversation_card_shows_the_deadline_too(client):
    approval = waiting_call(make_user("alice", role="operator"))
    client.force_login(make_user("second", role="operator"))
    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    card = page.split(f'id="approval-{approval.pk}"')[1].split("</form>")[0]
    assert "expires at" in card and timezone.localtime(approval.expires_at).strftime("%H:%M:%S") in card
    assert "data-countdown=" in card


def test_deny_with_a_reason_over_htmx_stores_it_and_the_card_shows_it(client, eager_celery):
    approval = waiting_call(make_user("alice", role="viewer"))
    Turn.objects.filter(pk=approval.turn_id).update(status=Turn.Status.DONE)  # nothing to resume in this test
    client.force_login(make_user("second", role="operator"))
    response = client.post(f"/approvals/{approval.pk}/decide",
                           {"decision": "deny", "reason": "<b>not during the release</b>"}, headers=HTMX)  # fmt: skip
    body = response.content.decode()
    assert response.status_code == 200 and "denied" in body
    assert "&lt;b&gt;not during the release&lt;/b&gt;" in body and "<b>" not in body  # shown inert
    assert ToolApproval.objects.get(pk=approval.pk).reason == "<b>not during the release</b>"
    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    assert "reason: <q>&lt;b&gt;not during the release&lt;/b&gt;</q>" in page


@pytest.mark.parametrize("reason", ["x" * 100_000, "line\x00break", "bell\x07"])
def test_a_reason_too_long_or_with_control_characters_is_refused_and_nothing_is_decided(client, reason):
    approval = waiting_call(make_user("alice", role="viewer"))
    client.force_login(make_user("second", role="operator"))
    response = client.post(f"/approvals/{approval.pk}/decide", {"decision": "deny", "reason": reason}, headers=HTMX)
    assert response.status_code == 400 and f'id="approval-{approval.pk}"' in response.content.decode()
    assert ToolApproval.objects.get(pk=approval.pk).status == "pending"
    plain = client.post(f"/approvals/{approval.pk}/decide", {"decision": "deny", "reason": reason})
    assert plain.status_code == 302 and ToolApproval.objects.get(pk=approval.pk).status == "pending"


def test_cancelling_a_waiting_turn_shows_its_approval_cancelled_and_the_wait_and_cancel_in_its_timeline(client):
    approval = waiting_call(make_user("alice", role="viewer"))
    operator = make_user("second", role="operator")
    client.force_login(operator)
    assert client.post(f"/console/turns/{approval.turn_id}/cancel", headers=HTMX).status_code == 204

    page = client.get(f"/console/{approval.turn.conversation_id}/").content.decode()
    card = page.split(f'id="approval-{approval.pk}"')[1].split("</div>")[0]
    assert "cancelled with the turn" in card and 'value="approve"' not in card and "expires at" not in card
    timeline = page.split(f'id="turn-{approval.turn_id}-timeline"')[1].split("</details>")[0]
    assert "Approval of restart_container (cancelled)" in timeline and "⏹ Cancelled by second" in timeline
    assert f"inbox-approval-{approval.pk}" not in client.get("/approvals/").content.decode()
    decide = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"}, headers=HTMX)
    assert decide.status_code == 409 and "already cancelled" in decide.content.decode()


def test_a_cancel_closes_no_approval_of_a_turn_that_had_ended(client):
    approval = waiting_call(make_user("alice", role="viewer"))
    Turn.objects.filter(pk=approval.turn_id).update(status=Turn.Status.DONE)
    assert cancel_turn(turn_id=approval.turn_id, user=make_user("second", role="operator")) is False
    assert ToolApproval.objects.get(pk=approval.pk).status == "pending"
