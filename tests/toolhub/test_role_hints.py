"""A page that hides an action for lack of a permission says which role the action needs."""

import datetime
import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.utils import timezone

from agents.models import Conversation, ToolApproval, Turn, TurnEvent
from agents.turns.start import create_turn
from agents.turns.workflows import start_workflow
from catalog.models import Domain, KnowledgeSnippet, McpServer
from tests.support.builders import make_policy, make_tool, make_user
from toolhub.roles import ADMIN, APPS, OPERATOR, VIEWER, ensure_groups, role_needed

pytestmark = pytest.mark.django_db


def test_role_needed_is_the_least_role_whose_group_holds_the_permission():
    groups = ensure_groups()
    for permission in Permission.objects.filter(content_type__app_label__in=APPS).select_related("content_type"):
        name = f"{permission.content_type.app_label}.{permission.codename}"
        holders = [role for role in (VIEWER, OPERATOR, ADMIN) if groups[role].permissions.filter(pk=permission.pk)]
        assert role_needed(name) == holders[0], name
    assert Group.objects.count() == 3


@pytest.fixture
def pages():
    """Every dashboard page that hides an action, with something on it to act on: {page: url}."""
    operator = make_user("owner", role="operator")
    make_policy(make_tool("get_weather"))
    snippet = KnowledgeSnippet.objects.create(
        domain=Domain.objects.create(name="loyalty", title="Loyalty"), action="answer", title="Points expire",
        text="Old.", source="handbook", owner="team", last_reviewed=timezone.localdate(), review_interval_days=30,
    )  # fmt: skip
    McpServer.objects.create(name="demo", command="/bin/false")
    turn = create_turn(Conversation.objects.create(owner=operator, title="restart"), "docker restart web")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.WAITING)
    approval = ToolApproval.objects.create(turn=turn, tool_call_id="c1", tool_name="restart_container",
                                           arguments={}, risk="high",
                                           expires_at=timezone.now() + datetime.timedelta(minutes=5))  # fmt: skip
    TurnEvent.objects.create(turn=turn, sequence=1, type=TurnEvent.Type.APPROVAL_REQUIRED,
                             payload={"approval_id": approval.pk, "tool_name": "restart_container"})  # fmt: skip
    start_workflow(conversation=turn.conversation, owner=operator, kind="rule", phase="criteria")
    return {
        "mcp servers": "/mcp-servers/",
        "mcp server": "/mcp-servers/demo/",
        "policies": "/policies/",
        "policy": "/policies/get_weather/",
        "knowledge": "/knowledge/?show=all",
        "snippet": f"/knowledge/{snippet.key}/",
        "tool": "/catalog/get_weather/",
        "console": "/console/",
        "conversation": f"/console/{turn.conversation_id}/",
        "workflows": "/workflows/",
    }


def hints(client, url: str) -> list[str]:
    page = client.get(url)
    assert page.status_code == 200, url
    found = re.findall(r'class="muted role-hint">(.*?)</', page.content.decode(), re.S)
    return [" ".join(hint.split()) for hint in found]


VIEWER_SEES = {
    "mcp servers": ["Adding an MCP server needs the admin role.", "Editing and syncing a server needs the admin role."],
    "mcp server": ["Editing, testing and syncing this server needs the admin role."],
    "policies": ["Editing, simulating and rolling back a policy needs the operator role."],
    "policy": ["Editing, simulating and rolling back this policy needs the operator role."],
    "knowledge": ["Marking a snippet reviewed and editing it needs the operator role."],
    "snippet": ["Marking this snippet reviewed and editing it needs the operator role."],
    "tool": ["Adding, editing and approving examples needs the operator role."],
    "console": ["Starting a conversation needs the operator role."],
    "conversation": ["Approving or denying needs the operator role.", "Chatting needs the operator role."],
    "workflows": ["Cancelling needs the operator role."],
}

OWNER_ONLY = "Only owner, who started it, adds to this conversation."


def test_a_viewer_is_told_the_role_each_hidden_action_needs(client, pages):
    client.force_login(make_user("watcher", role="viewer"))
    assert {name: hints(client, url) for name, url in pages.items()} == VIEWER_SEES


def test_an_operator_is_told_only_what_needs_an_admin_or_the_owner(client, pages):
    client.force_login(make_user("colleague", role="operator"))
    seen = {name: hints(client, url) for name, url in pages.items()}
    assert seen == {name: [] for name in pages} | {
        "mcp servers": VIEWER_SEES["mcp servers"],
        "mcp server": VIEWER_SEES["mcp server"],
        "conversation": [OWNER_ONLY],
    }


def test_an_admin_is_told_nothing_is_hidden_but_whose_conversation_it_is(client, pages):
    client.force_login(make_user("chief", role="admin"))
    seen = {name: hints(client, url) for name, url in pages.items()}
    assert seen == {name: [] for name in pages} | {"conversation": [OWNER_ONLY]}
