"""Risky calls wait for approval without holding a worker; decided once; no decision in time = denied."""

import datetime
import json

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from agents.access.api_keys import create_api_key
from agents.models import Conversation, Message, ToolApproval, Turn, TurnEvent
from agents.turns import runtime
from agents.turns.approvals import ApprovalClosed, decide_approval, expire_approval
from agents.turns.start import create_turn
from tests.builders import make_user

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


def test_the_end_user_confirms_through_the_api(waiting_turn, client, django_capture_on_commit_callbacks):
    approval = ToolApproval.objects.get(turn=waiting_turn)
    _, key = create_api_key(user=waiting_turn.conversation.owner, name="owner")
    _, stranger = create_api_key(user=make_user("stranger", role="viewer"), name="stranger")
    url = f"/v1/approvals/{approval.pk}"
    refused = client.post(url, json.dumps({"approve": True}), content_type="application/json",
                          headers={"Authorization": f"Bearer {stranger}"})  # fmt: skip
    assert refused.status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, json.dumps({"approve": True}), content_type="application/json",
                               headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert Turn.objects.get(pk=waiting_turn.pk).status == Turn.Status.DONE
    again = client.post(url, json.dumps({"approve": False}), content_type="application/json",
                        headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    assert again.status_code == 409


def test_cancelling_a_waiting_turn_closes_its_approval_and_answers_the_call(waiting_turn):
    from agents.turns.cancellation import cancel_turn

    assert cancel_turn(turn_id=waiting_turn.pk, user=make_user("op", role="operator"))

    approval = ToolApproval.objects.get(turn=waiting_turn)
    assert approval.status == ToolApproval.Status.EXPIRED  # nothing will resume an ended turn
    with pytest.raises(ApprovalClosed):
        decide_approval(approval_id=approval.pk, user=make_user("late", role="operator"), approve=True)
    (result,) = tool_results(waiting_turn)
    assert "restart_container" in result and "may or may not have taken effect" in result
    assert TurnEvent.objects.filter(turn=waiting_turn).order_by("sequence").last().type == TurnEvent.Type.DONE
