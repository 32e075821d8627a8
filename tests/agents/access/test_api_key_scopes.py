"""API keys act with their owner's permissions, inside their scopes, on /v1 and on /mcp (agents.access.abilities)."""

import importlib
import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from agents.access.abilities import CALL_TOOL, START_TURN, allows
from agents.access.api_keys import authenticate, create_api_key
from agents.models import ApiKey, Conversation, Turn
from tests.support.builders import make_policy, make_tool, make_user
from tests.support.mcp_asgi import McpAsgiClient

ASK = {"messages": [{"role": "user", "content": "What is 15 + 27?"}]}
CALC_SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


def user_in(role: str | None, username: str = "someone"):
    if role is None:
        return get_user_model().objects.create_user(username=username, password="a-long-test-password")
    return make_user(username, role=role)


def key_for(role: str | None, scopes=ApiKey.DEFAULT_SCOPES) -> str:
    return create_api_key(user=user_in(role), name="test", scopes=scopes)[1]


def chat(client, key):
    return client.post("/v1/chat/completions", data=json.dumps(ASK), content_type="application/json",
                       headers={"Authorization": f"Bearer {key}"})  # fmt: skip


# --- /v1 ----------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["viewer", None])
def test_a_viewers_or_role_less_key_cannot_start_a_turn(client, role):
    response = chat(client, key_for(role))

    assert response.status_code == 403
    error = response.json()["error"]
    assert error["type"] == "permission_error" and error["code"] == "insufficient_permissions"
    assert "may not start a turn" in error["message"] and "agents.add_turn" in error["message"]
    assert not Conversation.objects.exists() and not Turn.objects.exists()


@pytest.mark.django_db
def test_a_read_only_key_of_an_operator_lists_models_but_cannot_start_a_turn(client):
    key = key_for("operator", scopes=[ApiKey.Scope.READ])

    assert client.get("/v1/models", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    response = chat(client, key)
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "insufficient_scope" and "needs the scope chat (it has read)" in error["message"]
    assert not Turn.objects.exists()


@pytest.mark.django_db
def test_an_mcp_only_key_neither_chats_nor_lists_models(client):
    key = key_for("operator", scopes=[ApiKey.Scope.MCP])

    assert chat(client, key).status_code == 403
    response = client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 403 and response.json()["error"]["code"] == "insufficient_scope"


@pytest.mark.django_db
def test_a_role_less_key_may_not_list_models(client):
    response = client.get("/v1/models", headers={"Authorization": f"Bearer {key_for(None)}"})

    assert response.status_code == 403 and "agents.view_modelprofile" in response.json()["error"]["message"]


@pytest.mark.django_db
def test_the_dashboard_and_the_api_share_one_rule(client):
    """The console offers a chat form exactly to those whose keys may start turns."""
    for role in ("viewer", "operator", "admin"):
        user = make_user(role, role=role)
        client.force_login(user)
        form_shown = 'name="message"' in client.get("/console/").content.decode()
        assert form_shown == allows(user, START_TURN) == (role != "viewer")
        assert allows(user, START_TURN, scopes=[ApiKey.Scope.READ]) is False


# --- creating keys and their scopes -------------------------------------------------------------


@pytest.mark.django_db
def test_create_api_key_defaults_to_chat_and_mcp_and_takes_scopes(capsys):
    make_user("operator")
    call_command("create_api_key", "agent")
    default = authenticate(capsys.readouterr().out.strip().splitlines()[-1])
    call_command("create_api_key", "reader", "--scope", "read")
    out = capsys.readouterr().out
    reader = authenticate(out.strip().splitlines()[-1])

    assert default.scopes == ["chat", "mcp"]
    assert reader.scopes == ["read"] and "scopes read" in out
    with pytest.raises(CommandError, match="invalid choice: 'admin'"):
        call_command("create_api_key", "x", "--scope", "admin")


@pytest.mark.django_db
@pytest.mark.parametrize("scopes", [[], ["admin"], ["chat", "everything"]])
def test_a_key_needs_known_scopes(scopes):
    with pytest.raises(ValidationError):
        create_api_key(user=make_user(), name="bad", scopes=scopes)
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_staff_edit_a_keys_scopes_in_the_admin_but_create_keys_with_the_command(client):
    api_key, _ = create_api_key(user=make_user(), name="agent")
    client.force_login(get_user_model().objects.create_superuser("root", password="a-long-test-password"))
    url = f"/admin/agents/apikey/{api_key.pk}/change/"

    assert 'value="read"' in client.get(url).content.decode()
    assert client.post(url, {"name": "agent", "scopes": ["read"]}).status_code == 302
    api_key.refresh_from_db()
    assert api_key.scopes == ["read"] and not api_key.revoked
    response = client.post(url, {"name": "agent", "scopes": ["root"]})
    assert response.status_code == 200 and "not one of the available choices" in response.content.decode()
    assert client.get("/admin/agents/apikey/add/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_existing_keys_chat_and_mcp():
    executor = MigrationExecutor(connection)
    before, after = [("agents", "0012_mcp_results_and_found_tools")], [("agents", "0013_api_key_scopes")]
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    owner = old_apps.get_model("auth", "User").objects.create(username="old-owner")
    old_apps.get_model("agents", "ApiKey").objects.create(name="old", user_id=owner.pk, prefix="abc", key_hash="0")
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert ApiKey.objects.get(prefix="abc").scopes == ["chat", "mcp"]
    importlib.import_module("tests.support.builders").restore_migrated_routing_data()


# --- /mcp ---------------------------------------------------------------------------------------


@sync_to_async
def mcp_catalog_and_key(role, scopes=ApiKey.DEFAULT_SCOPES) -> str:
    make_policy(make_tool("calculate", input_schema=CALC_SCHEMA, always_load=True))
    return key_for(role, scopes)


@pytest.mark.parametrize("role", ["viewer", "operator"])
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_over_mcp_a_viewer_lists_tools_but_only_an_operator_calls_one(mcp_endpoint, role):
    client = McpAsgiClient(mcp_endpoint, await mcp_catalog_and_key(role))

    assert (await client.initialize()).status == 200
    listed = await client.list_tools()
    assert listed.status == 200 and [t["name"] for t in listed.result["tools"]] == ["calculate"]
    called = await client.call_tool("calculate", {"expression": "6 * 7"})
    if role == "operator":
        assert called.status == 200 and not called.result["isError"]
        assert json.loads(called.result["content"][0]["text"])["result"] == 42
    else:
        assert called.status == 403 and "www-authenticate" not in called.headers
        assert called.messages[0]["id"] == 3  # the JSON-RPC error answers the refused request
        assert "may not call a tool" in called.error["message"] and called.error["code"] == -32003


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_role_less_key_is_refused_the_whole_mcp_endpoint(mcp_endpoint):
    client = McpAsgiClient(mcp_endpoint, await mcp_catalog_and_key(None))

    reply = await client.initialize()
    assert reply.status == 403 and "catalog.view_tool" in reply.error["message"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_operators_read_only_key_lists_tools_over_mcp_but_calls_none(mcp_endpoint):
    client = McpAsgiClient(mcp_endpoint, await mcp_catalog_and_key("operator", [ApiKey.Scope.READ]))

    assert (await client.initialize()).status == 200
    assert (await client.list_tools()).status == 200
    called = await client.call_tool("calculate", {"expression": "1 + 1"})
    assert called.status == 403
    assert called.headers["www-authenticate"] == 'Bearer error="insufficient_scope", scope="mcp"'


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_chat_only_key_is_refused_mcp_with_the_scopes_it_would_need(mcp_endpoint):
    client = McpAsgiClient(mcp_endpoint, await mcp_catalog_and_key("operator", [ApiKey.Scope.CHAT]))

    reply = await client.initialize()
    assert reply.status == 403
    assert reply.headers["www-authenticate"] == 'Bearer error="insufficient_scope", scope="mcp read"'


@pytest.mark.django_db
def test_calling_tools_needs_the_permission_turns_need():
    operator, viewer = make_user("op", role="operator"), make_user("view", role="viewer")

    assert allows(operator, CALL_TOOL) and not allows(viewer, CALL_TOOL)
    assert CALL_TOOL.permission == START_TURN.permission


@pytest.mark.django_db
def test_a_users_permissions_are_read_in_one_query_as_django_reads_them(django_assert_num_queries):
    from django.contrib.auth.models import Permission

    from agents.access.abilities import read_permissions

    operator = make_user("op", role="operator")
    operator.user_permissions.add(Permission.objects.get(codename="delete_apikey"))  # one of the user's own
    superuser = get_user_model().objects.create_superuser(username="root", password="a-long-test-password")
    for user in (operator, make_user("watcher", role="viewer"), user_in(None), superuser):
        expected = get_user_model().objects.get(pk=user.pk).get_all_permissions()  # Django's two queries
        fresh = get_user_model().objects.get(pk=user.pk)
        with django_assert_num_queries(1):
            read_permissions(fresh)
            assert fresh.get_all_permissions() == expected
    assert "agents.delete_apikey" in operator.get_all_permissions() and expected  # not an empty comparison
