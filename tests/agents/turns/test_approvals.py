"""Risky calls wait for approval without holding a worker; decided once; no decision in time = denied; four eyes:
at a covered risk level whoever started the turn may deny its call but not approve it."""

import datetime
import json

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from agents.access.api_keys import create_api_key
from agents.models import Conversation, Message, ToolApproval, Turn, TurnEvent
from agents.turns import runtime
from agents.turns.approvals import ApprovalClosed, FourEyes, decide_approval, expire_approval
from agents.turns.start import create_turn
from catalog.policies import four_eyes
from tests.support.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_celery")]
RESTART = {"name": "restart_container", "arguments": {"container": "web"}}


@pytest.fixture
def scripted(scripted_model, demo_catalog):
    scripted_model.steps = [{"tool_calls": [RESTART]}, {"content": "Done with the container."}]
    return scripted_model


@pytest.fixture
def waiting_turn(scripted):
    owner = make_user("owner", role="viewer")
    turn = create_turn(Conversation.objects.create(owner=owner), "docker restart web")
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def tool_results(turn) -> list[str]:
    return list(Message.objects.filter(turn=turn, role="tool").values_list("content", flat=True))


def test_a_risky_call_pauses_the_turn_with_an_approval_request(waiting_turn):
    assert waiting_turn.status == Turn.Status.WAITING
    approval = ToolApproval.objects.get(turn=waiting_turn)
    assert (approval.tool_name, approval.risk, approval.status) == ("restart_container", "high", "pending")
    event = TurnEvent.objects.get(turn=waiting_turn, type=TurnEvent.Type.APPROVAL_REQUIRED)
    assert event.payload["approval_id"] == approval.pk and event.payload["arguments"] == {"container": "web"}
    assert not tool_results(waiting_turn), "the call has not run"
    runtime.run_turn(waiting_turn.id)  # a stray redelivery while waiting does nothing
    assert Turn.objects.get(pk=waiting_turn.pk).status == Turn.Status.WAITING


def test_an_operator_approves_and_the_turn_finishes(waiting_turn, django_capture_on_commit_callbacks):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval_id=approval.pk, user=make_user("op", role="operator"), approve=True)
    waiting_turn.refresh_from_db()
    assert waiting_turn.status == Turn.Status.DONE
    (result,) = tool_results(waiting_turn)
    assert "requires an operator's approval" not in result  # it was executed, not refused
    assert Message.objects.filter(turn=waiting_turn, role="assistant").last().content == "Done with the container."
    with pytest.raises(ApprovalClosed):
        decide_approval(approval_id=approval.pk, user=make_user("op2", role="operator"), approve=False)


def test_a_denied_call_is_reported_to_the_model(waiting_turn, django_capture_on_commit_callbacks):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval_id=approval.pk, user=make_user("op", role="operator"), approve=False)
    (result,) = tool_results(waiting_turn)
    assert "was denied by an operator" in result
    assert Turn.objects.get(pk=waiting_turn.pk).status == Turn.Status.DONE


def test_a_deny_reason_is_stored_shown_in_the_events_and_told_to_the_model(
    waiting_turn, django_capture_on_commit_callbacks
):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval_id=approval.pk, user=make_user("op", role="operator"), approve=False,
                        reason="  web is serving a release, restart after 18:00  ")  # fmt: skip
    assert ToolApproval.objects.get(pk=approval.pk).reason == "web is serving a release, restart after 18:00"
    decided = TurnEvent.objects.get(turn=waiting_turn, phase="approval_decided")
    reason = "web is serving a release, restart after 18:00"
    assert decided.payload["message"] == f"⛔ restart_container denied by op: {reason}"
    (result,) = tool_results(waiting_turn)
    assert "was denied by an operator (reason: web is serving a release, restart after 18:00)" in result


def test_an_approval_keeps_no_reason_and_a_reason_too_long_is_refused(waiting_turn):
    from agents.turns.approvals import BadReason

    approval = ToolApproval.objects.get(turn=waiting_turn)
    with pytest.raises(BadReason):
        decide_approval(approval_id=approval.pk, user=make_user("op", role="operator"), approve=False,
                        reason="x" * (ToolApproval.REASON_MAX_LENGTH + 1))  # fmt: skip
    assert ToolApproval.objects.get(pk=approval.pk).status == "pending"
    decide_approval(approval_id=approval.pk, user=make_user("op2", role="operator"), approve=True, reason="ignored")
    assert ToolApproval.objects.get(pk=approval.pk).reason == ""


def test_approval_that_times_out_is_denied_and_the_model_is_told(waiting_turn, django_capture_on_commit_callbacks):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    assert expire_approval(approval.pk) is False  # not yet due
    ToolApproval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert expire_approval(approval.pk) is True
    assert ToolApproval.objects.get(pk=approval.pk).status == "expired"
    (result,) = tool_results(waiting_turn)
    assert "was not approved in time, so it was denied" in result
    with pytest.raises(ApprovalClosed):
        decide_approval(approval_id=approval.pk, user=make_user("op", role="operator"), approve=True)


def test_approval_from_a_user_without_the_permission_is_refused(waiting_turn, client):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    viewer = make_user("someone_else", role="viewer")
    with pytest.raises(PermissionDenied):
        decide_approval(approval_id=approval.pk, user=viewer, approve=True)
    client.force_login(viewer)
    response = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"})
    assert response.status_code == 403
    assert ToolApproval.objects.get(pk=approval.pk).status == "pending"


def post_decision(client, approval, key, approve=True):
    return client.post(f"/v1/approvals/{approval.pk}", json.dumps({"approve": approve}),
                       content_type="application/json", headers={"Authorization": f"Bearer {key}"})  # fmt: skip


def test_another_operators_key_approves_through_the_api(waiting_turn, client, django_capture_on_commit_callbacks):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    _, key = create_api_key(user=make_user("second", role="operator"), name="second")
    _, stranger = create_api_key(user=make_user("stranger", role="viewer"), name="stranger")
    refused = post_decision(client, approval, stranger)
    assert refused.status_code == 403 and refused.json()["error"]["code"] is None
    with django_capture_on_commit_callbacks(execute=True):
        response = post_decision(client, approval, key)
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert Turn.objects.get(pk=waiting_turn.pk).status == Turn.Status.DONE
    assert ToolApproval.objects.get(pk=approval.pk).decided_by.username == "second"
    assert post_decision(client, approval, key, approve=False).status_code == 409


def test_whoever_started_the_turn_cannot_approve_its_high_risk_call(client, scripted):
    """Four eyes, on by default for high risk: not in the console, not with the API key the turn came from."""
    owner = make_user("starter", role="operator")
    turn = create_turn(Conversation.objects.create(owner=owner), "docker restart web")
    runtime.run_turn(turn.id)
    approval = ToolApproval.objects.get(turn=turn)
    with pytest.raises(FourEyes):
        decide_approval(approval_id=approval.pk, user=owner, approve=True)
    _, key = create_api_key(user=owner, name="the key that chats")
    response = post_decision(client, approval, key)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "four_eyes" and "another operator" in response.json()["error"]["message"]
    client.force_login(owner)
    page = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"})
    assert page.status_code == 403 and "another operator" in page.content.decode()
    htmx = client.post(f"/approvals/{approval.pk}/decide", {"decision": "approve"}, headers={"HX-Request": "true"})
    assert htmx.status_code == 403 and "Needs another operator" in htmx.content.decode()
    assert ToolApproval.objects.get(pk=approval.pk).status == "pending"


def test_whoever_started_the_turn_may_still_deny_its_call(waiting_turn, client, django_capture_on_commit_callbacks):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    _, key = create_api_key(user=waiting_turn.conversation.owner, name="owner")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_decision(client, approval, key, approve=False)
    assert response.status_code == 200 and response.json()["status"] == "denied"
    assert Turn.objects.get(pk=waiting_turn.pk).status == Turn.Status.DONE


def test_the_end_user_confirms_a_call_below_the_four_eyes_levels(
    waiting_turn, client, django_capture_on_commit_callbacks
):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    ToolApproval.objects.filter(pk=approval.pk).update(risk="medium")  # a medium-risk call that asks for confirmation
    _, key = create_api_key(user=waiting_turn.conversation.owner, name="owner")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_decision(client, approval, key)
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert Turn.objects.get(pk=waiting_turn.pk).status == Turn.Status.DONE


def test_four_eyes_can_be_turned_off_or_cover_lower_levels(waiting_turn, client, settings):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    owner = waiting_turn.conversation.owner
    settings.TOOLHUB_FOUR_EYES_RISKS = ["medium"]  # covers medium and every level above it
    assert [four_eyes.covers(risk) for risk in ("low", "medium", "high", "critical")] == [False, True, True, True]
    with pytest.raises(FourEyes):
        decide_approval(approval_id=approval.pk, user=owner, approve=True)
    settings.TOOLHUB_FOUR_EYES_RISKS = []  # TOOLHUB_FOUR_EYES_RISKS=none
    assert not four_eyes.covers("critical")
    _, key = create_api_key(user=owner, name="owner")
    assert post_decision(client, approval, key).status_code == 200


def test_cancelling_a_waiting_turn_closes_its_approval_and_answers_the_call(waiting_turn):
    from agents.turns.cancellation import cancel_turn

    assert cancel_turn(turn_id=waiting_turn.pk, user=make_user("op", role="operator"))

    approval = ToolApproval.objects.get(turn=waiting_turn)
    # nothing will resume an ended turn; cancelled with it, not expired
    assert (approval.status, approval.decided_by.username) == (ToolApproval.Status.CANCELLED, "op")
    with pytest.raises(ApprovalClosed, match="already cancelled"):
        decide_approval(approval_id=approval.pk, user=make_user("late", role="operator"), approve=True)
    closed = TurnEvent.objects.get(turn=waiting_turn, phase="approval_decided")
    assert (closed.payload["decision"], closed.payload["approval_id"]) == ("cancelled", approval.pk)
    assert "cancelled with the turn by op" in closed.payload["message"]
    (result,) = tool_results(waiting_turn)
    assert "restart_container" in result and "may or may not have taken effect" in result
    assert TurnEvent.objects.filter(turn=waiting_turn).order_by("sequence").last().type == TurnEvent.Type.DONE
