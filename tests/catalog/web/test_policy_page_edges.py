"""The policy page's rough edges: a write policy with no domain warns, "rejected" reads as denied, a rollback
records who and when, and always-load is a control of the page."""

import pytest
from django.utils import timezone

from catalog.models import PolicyRollback, Tool
from tests.catalog.web.test_policy_editor import form_data
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client):
    client.force_login(make_user("op", role="operator"))
    return client


def flashed(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.parametrize("operation", ["create", "update", "delete", "execute"])
def test_an_active_write_policy_with_no_domain_warns_on_save_and_on_its_page(operator_client, operation):
    policy = make_policy(make_tool("change_order"))
    response = operator_client.post("/policies/change_order/", form_data(policy, operation=operation, domains=[]),
                                    follow=True)  # fmt: skip
    warning = next(message for message in flashed(response) if "has no domain" in message)
    assert f"This {operation} policy has no domain: routing never offers the tool" in warning
    policy.refresh_from_db()
    assert (policy.version, policy.operation) == (2, operation)  # saved all the same
    assert 'id="routing-warning"' in response.content.decode()


@pytest.mark.parametrize("changes", [
    {"operation": "read", "domains": []},  # a read tool is offered whatever the domains
    {"operation": "create", "domains": ["general"]},
    {"operation": "create", "domains": [], "workflow_phases": ["draft"]},  # a workflow tool is offered by phase
    {"operation": "create", "domains": [], "status": "draft"},  # refused anyway, as the page says
])  # fmt: skip
def test_no_routing_warning_when_routing_can_offer_the_tool_or_it_is_not_active(operator_client, changes):
    policy = make_policy(make_tool("change_order"), risk="low")
    response = operator_client.post("/policies/change_order/", form_data(policy, **changes), follow=True)
    assert response.redirect_chain and not any("has no domain" in m for m in flashed(response))
    assert 'id="routing-warning"' not in response.content.decode()


def test_a_denied_policy_is_called_denied_and_the_save_does_not_say_it_is_active(operator_client):
    policy = make_policy(make_tool("get_weather"))
    response = operator_client.post("/policies/get_weather/", form_data(policy, status="rejected", note="deny"),
                                    follow=True)  # fmt: skip
    (saved,) = [message for message in flashed(response) if message.startswith("Saved")]
    assert saved == ("Saved version 2 of get_weather's policy; it is the current version, status denied: the tool "
                     "is refused everywhere.")  # fmt: skip
    page = response.content.decode()
    assert "it is active" not in page
    assert 'status <span class="status status-rejected">denied</span> (the tool is refused everywhere)' in page
    assert '<option value="rejected" selected>denied</option>' in page
    policies = operator_client.get("/policies/").content.decode()
    assert '<span class="status status-rejected">denied</span> v2' in policies
    again = operator_client.post("/policies/get_weather/", form_data(policy, status="active", base_version=2,
                                                                     note="allow"), follow=True)  # fmt: skip
    assert "status active: routing may offer the tool." in " ".join(flashed(again))


def test_a_rollback_records_who_and_when_and_the_history_shows_it(operator_client):
    policy = make_policy(make_tool("get_weather"))
    operator_client.post("/policies/get_weather/", form_data(policy, risk="medium", note="v2"))
    before = timezone.now()
    response = operator_client.post("/policies/get_weather/rollback/1/", follow=True)
    assert "Version 1 is the current version again (rolled back by op)." in flashed(response)
    (rollback,) = PolicyRollback.objects.all()
    assert (rollback.from_version, rollback.to_version, rollback.actor.username) == (2, 1, "op")
    assert rollback.created_at >= before
    history = response.content.decode().split('id="history"')[1]
    entry = history.split(f'id="rollback-{rollback.pk}"')[1].split("</li>")[0]
    assert 'v2 → <a href="#v1">v1</a>' in entry and "rolled back by op at" in entry
    assert timezone.localtime(rollback.created_at).strftime("%Y-%m-%d %H:%M") in entry


def test_an_operator_sets_always_load_from_the_policy_page(operator_client):
    make_policy(make_tool("get_weather"))
    page = operator_client.get("/policies/get_weather/").content.decode()
    assert 'action="/policies/get_weather/always-load"' in page and "Loaded or deferred as routing decides" in page
    response = operator_client.post("/policies/get_weather/always-load", {"always_load": "on"}, follow=True)
    assert Tool.objects.get(name="get_weather").always_load is True
    assert "get_weather is always loaded wherever its policy allows it." in flashed(response)
    assert 'name="always_load" id="id_always_load" checked' in response.content.decode()
    operator_client.post("/policies/get_weather/always-load", {})  # the box left unticked
    assert Tool.objects.get(name="get_weather").always_load is False


def test_a_viewer_sees_the_loading_but_no_control_and_cannot_change_it(client):
    make_policy(make_tool("get_weather", always_load=True))
    client.force_login(make_user("watcher", role="viewer"))
    page = client.get("/policies/get_weather/").content.decode()
    loading = page.split('id="always-load"')[1].split("</section>")[0]
    assert "Always loaded: its schema is in the prompt" in loading and "<form" not in loading
    assert client.post("/policies/get_weather/always-load", {"always_load": ""}).status_code == 403
    assert Tool.objects.get(name="get_weather").always_load is True
