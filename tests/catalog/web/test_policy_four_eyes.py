"""Four eyes on policy changes: loosening a high-risk tool waits for a second operator, tightening applies at once."""

import logging

import pytest

from catalog.models import Domain, PolicyChangeRequest
from catalog.policies.four_eyes import loosening
from catalog.policies.versions import snapshot
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db


def form_data(policy, **changes):
    """The editor's POST for `policy` as it is now, with `changes` applied."""
    data = snapshot(policy) | {"note": "a reason", "base_version": policy.version} | changes
    post = {key: data[key] for key in ("status", "operation", "risk", "domains", "note", "base_version")}
    post |= {"workflow_phases": ", ".join(data["workflow_phases"]), "aliases": ", ".join(data["aliases"])}
    if data["requires_confirmation"]:
        post["requires_confirmation"] = "on"
    return post


@pytest.fixture
def transfer():
    """A high-risk write tool whose calls wait for confirmation, as the demo's transfer_points."""
    return make_policy(make_tool("transfer_points"), domains=("loyalty",), operation="update", risk="high",
                       requires_confirmation=True)  # fmt: skip


@pytest.fixture
def first(client):
    client.force_login(make_user("first", role="operator"))
    return client


def test_a_risk_downgrade_waits_for_a_second_operator_who_applies_it(first, client, transfer, caplog):
    caplog.set_level(logging.INFO, logger="toolhub.audit")
    response = first.post("/policies/transfer_points/", form_data(transfer, risk="low", requires_confirmation=False,
                                                                   note="low risk is enough"))  # fmt: skip
    assert response.status_code == 302
    transfer.refresh_from_db()
    assert (transfer.version, transfer.risk, transfer.requires_confirmation) == (1, "high", True)  # not applied
    change = PolicyChangeRequest.objects.get()
    assert change.status == "pending" and change.requested_by.username == "first"
    assert change.reasons == ["lowers the risk from high to low", "removes the confirmation of its calls"]
    page = first.get("/policies/transfer_points/").content.decode()
    pending = page.split('id="pending-change"')[1].split("</section>")[0]
    assert "lowers the risk from high to low" in pending and "Needs another operator" in pending
    assert 'value="approve"' not in pending and 'value="reject"' in pending
    assert "transfer_points" in first.get("/policies/").content.decode().split('id="pending-changes"')[1]

    url = f"/policies/transfer_points/changes/{change.pk}/"
    assert first.post(url, {"decision": "approve"}).status_code == 403  # not by the operator who asked
    assert PolicyChangeRequest.objects.get().status == "pending"

    client.force_login(make_user("second", role="operator"))
    assert 'value="approve"' in client.get("/policies/transfer_points/").content.decode()
    assert client.post(url, {"decision": "approve"}).status_code == 302
    transfer.refresh_from_db()
    assert (transfer.version, transfer.risk, transfer.requires_confirmation) == (2, "low", False)
    change.refresh_from_db()
    assert (change.status, change.decided_by.username, change.version) == ("applied", "second", 2)
    assert change.requested_at <= change.decided_at
    version = transfer.versions.get(number=2)
    assert version.author.username == "first" and version.note == "low risk is enough (approved by second)"
    audit = [record.getMessage() for record in caplog.records if record.name == "toolhub.audit"]
    assert any("requested by first" in line and "waits for a second operator" in line for line in audit)
    assert any("applied by second" in line for line in audit)
    history = client.get("/policies/transfer_points/").content.decode().split('id="history"')[1]
    assert "asked by first" in history and "applied by second" in history and "became" in history
    assert client.post(url, {"decision": "reject"}).status_code == 302  # decided once: a message, no change
    assert PolicyChangeRequest.objects.get().status == "applied"


def test_a_pending_change_can_be_rejected_and_the_policy_stays(first, client, transfer):
    Domain.objects.create(name="shop", title="Shop")
    first.post("/policies/transfer_points/", form_data(transfer, domains=["loyalty", "shop"]))
    change = PolicyChangeRequest.objects.get()
    assert change.reasons == ["adds the domain shop"]
    client.force_login(make_user("second", role="operator"))
    assert client.post(f"/policies/transfer_points/changes/{change.pk}/", {"decision": "reject"}).status_code == 302
    change.refresh_from_db()
    transfer.refresh_from_db()
    assert (change.status, change.decided_by.username, change.version) == ("rejected", "second", None)
    assert (transfer.version, snapshot(transfer)["domains"]) == (1, ["loyalty"])


def test_tightening_a_high_risk_tool_applies_at_once(first, transfer):
    assert first.post("/policies/transfer_points/", form_data(transfer, risk="critical")).status_code == 302
    transfer.refresh_from_db()
    assert (transfer.version, transfer.risk) == (2, "critical")
    assert first.post("/policies/transfer_points/", form_data(transfer, domains=[])).status_code == 302
    transfer.refresh_from_db()
    assert (transfer.version, snapshot(transfer)["domains"]) == (3, [])
    assert not PolicyChangeRequest.objects.exists()
    # Raising the risk first does not take the tool out of four eyes: critical is covered as well.
    first.post("/policies/transfer_points/", form_data(transfer, risk="low", requires_confirmation=False))
    transfer.refresh_from_db()
    assert transfer.risk == "critical" and PolicyChangeRequest.objects.get().status == "pending"


def test_low_risk_tools_change_at_once_by_default(first):
    policy = make_policy(make_tool("get_weather"), risk="medium", requires_confirmation=True)
    Domain.objects.create(name="weather", title="Weather")
    post = form_data(policy, risk="low", requires_confirmation=False, domains=["general", "weather"])
    assert first.post("/policies/get_weather/", post).status_code == 302
    policy.refresh_from_db()
    assert (policy.version, policy.risk) == (2, "low") and not PolicyChangeRequest.objects.exists()


def test_one_change_waits_at_a_time_and_the_requester_may_withdraw_it(first, transfer):
    first.post("/policies/transfer_points/", form_data(transfer, risk="medium"))
    page = first.post("/policies/transfer_points/", form_data(transfer, risk="low")).content.decode()
    assert "already waiting for a second operator" in page
    change = PolicyChangeRequest.objects.get()
    assert first.post(f"/policies/transfer_points/changes/{change.pk}/", {"decision": "reject"}).status_code == 302
    assert PolicyChangeRequest.objects.get().status == "rejected"


def test_a_rollback_that_loosens_waits_for_a_second_operator(first, client, transfer):
    first.post("/policies/transfer_points/", form_data(transfer, risk="critical"))  # v2, at once
    confirm = first.get("/policies/transfer_points/rollback/1/").content.decode()
    assert "Ask a second operator to roll back to v1" in confirm
    # v1 is high risk: going back lowers a covered tool's risk.
    first.post("/policies/transfer_points/rollback/1/")
    transfer.refresh_from_db()
    assert (transfer.version, transfer.risk) == (2, "critical")
    change = PolicyChangeRequest.objects.get()
    assert change.note == "Roll back to v1" and change.reasons == ["lowers the risk from critical to high"]
    client.force_login(make_user("second", role="operator"))
    client.post(f"/policies/transfer_points/changes/{change.pk}/", {"decision": "approve"})
    transfer.refresh_from_db()
    assert (transfer.version, transfer.risk) == (3, "high")


def test_approving_a_change_made_against_an_older_version_is_refused(first, client, transfer):
    first.post("/policies/transfer_points/", form_data(transfer, risk="low", requires_confirmation=False))
    first.post("/policies/transfer_points/", form_data(transfer, aliases=["send points"]))  # v2, at once
    change = PolicyChangeRequest.objects.get()
    client.force_login(make_user("second", role="operator"))
    page = client.post(f"/policies/transfer_points/changes/{change.pk}/", {"decision": "approve"}, follow=True)
    assert "changed to version 2 since" in page.content.decode()
    transfer.refresh_from_db()
    assert (transfer.version, transfer.risk) == (2, "high") and PolicyChangeRequest.objects.get().status == "pending"


def test_a_viewer_cannot_decide_a_change_whether_it_exists_or_not(first, client, transfer):
    first.post("/policies/transfer_points/", form_data(transfer, risk="low", requires_confirmation=False))
    change = PolicyChangeRequest.objects.get()
    client.force_login(make_user("watcher", role="viewer"))
    for pk in (change.pk, change.pk + 1000):
        assert client.post(f"/policies/transfer_points/changes/{pk}/", {"decision": "approve"}).status_code == 403
    assert "Approve the change" not in client.get("/policies/transfer_points/").content.decode()
    assert PolicyChangeRequest.objects.get().status == "pending"


def test_loosening_names_what_needs_a_second_operator(settings):
    high = {"risk": "high", "requires_confirmation": True, "domains": ["loyalty"]}
    assert loosening(None, high) == []  # a first policy has nothing to loosen
    assert loosening(high, high | {"risk": "critical", "domains": []}) == []
    assert loosening(high, high | {"risk": "medium"}) == ["lowers the risk from high to medium"]
    assert loosening(high, high | {"domains": ["loyalty", "a", "b"]}) == ["adds the domains a, b"]
    settings.TOOLHUB_FOUR_EYES_RISKS = []
    assert loosening(high, high | {"risk": "low", "requires_confirmation": False}) == []


def test_the_django_admin_shows_policies_but_cannot_change_them(client):
    """The admin would skip both the version history and four eyes: it only shows policies."""
    tool = make_tool("transfer_points")
    policy = make_policy(tool, operation="update", risk="high", requires_confirmation=True)
    root = make_user("root", role="admin")
    root.is_staff = root.is_superuser = True
    root.save()
    client.force_login(root)

    shown = client.get(f"/admin/catalog/toolpolicy/{policy.pk}/change/")
    lowered = client.post(f"/admin/catalog/toolpolicy/{policy.pk}/change/", {"tool": tool.pk, "operation": "update",
                          "risk": "low", "status": policy.status, "requires_confirmation": ""})  # fmt: skip
    listed = client.get("/admin/catalog/tool/")

    assert shown.status_code == 200 and 'name="risk"' not in shown.content.decode()
    assert lowered.status_code == 403
    policy.refresh_from_db()
    assert (policy.risk, policy.requires_confirmation) == ("high", True)
    assert listed.status_code == 200
    assert client.get("/admin/catalog/toolpolicy/add/").status_code == 403
