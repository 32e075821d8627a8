"""The /mcp-servers/ pages: list, add/edit with field errors, test a connection, sync through the task with progress."""

import sys

import pytest
from django.urls import reverse
from django.utils import timezone

from catalog.mcp_client import client as mcp_client
from catalog.mcp_client import sync as mcp_sync
from catalog.models import McpServer, Tool
from catalog.tasks import sync_mcp_server
from tests.support.builders import make_policy, make_user

pytestmark = pytest.mark.django_db

GENERATED = ["-m", "tests.support.generated_mcp_server"]


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    mcp_client.close_all()


def generated_server(count=3, *extra, name="gen") -> McpServer:
    return McpServer.objects.create(name=name, command=sys.executable, args=[*GENERATED, "--tools", str(count), *extra])


def signed_in(client, role):
    client.force_login(make_user(username=role, role=role))
    return client


def post_urls(server):
    return [
        reverse("mcp-server-add"),
        reverse("mcp-server-edit", args=[server.name]),
        reverse("mcp-server-test", args=[server.name]),
        reverse("mcp-server-sync", args=[server.name]),
    ]


# --- permissions --------------------------------------------------------------------------


def test_anonymous_is_sent_to_login_from_every_page_and_post(client):
    server = generated_server()
    pages = [reverse("mcp-servers"), reverse("mcp-server-detail", args=[server.name]),
             reverse("mcp-server-progress", args=[server.name])]  # fmt: skip
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    for url in post_urls(server):
        response = client.post(url, {"name": "x"})
        assert response.status_code == 302 and response.url.startswith("/login/"), url


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewer_and_operator_may_look_but_every_post_is_forbidden(client, role):
    server = generated_server()
    signed_in(client, role)

    page = client.get(reverse("mcp-servers"))
    assert page.status_code == 200 and server.name in page.content.decode()
    assert "Sync</button>" not in page.content.decode()
    assert client.get(reverse("mcp-server-detail", args=[server.name])).status_code == 200
    for url in post_urls(server):
        assert client.post(url, {"name": "other", "transport": "stdio", "command": "x"}).status_code == 403, url
    assert client.get(reverse("mcp-server-add")).status_code == 403
    assert client.get(reverse("mcp-server-edit", args=[server.name])).status_code == 403
    server.refresh_from_db()
    assert (McpServer.objects.count(), server.sync_phase, server.args) == (1, McpServer.SyncPhase.IDLE, server.args)


def test_a_user_without_any_role_cannot_see_the_servers(client, django_user_model):
    client.force_login(django_user_model.objects.create_user(username="nobody", password="a-long-test-password"))

    assert client.get(reverse("mcp-servers")).status_code == 403


def test_env_and_header_values_are_not_shown_to_a_viewer(client):
    McpServer.objects.create(name="secretive", command="x", env={"API_TOKEN": "s3cret-value"})
    signed_in(client, "viewer")

    page = client.get(reverse("mcp-server-detail", args=["secretive"])).content.decode()

    assert "API_TOKEN" in page and "s3cret-value" not in page


# --- add and edit -------------------------------------------------------------------------


def test_add_form_shows_errors_next_to_the_fields(client):
    signed_in(client, "admin")

    response = client.post(
        reverse("mcp-server-add"),
        {"name": "bad server", "transport": "stdio", "command": "", "args": '{"not": "a list"}', "env": "[",
         "headers": "{}", "url": ""},
    )  # fmt: skip

    assert response.status_code == 200
    form = response.context["form"]
    assert set(form.errors) >= {"name", "env"}
    assert not McpServer.objects.exists()


def test_stdio_server_without_a_command_is_refused_on_the_command_field(client):
    signed_in(client, "admin")

    response = client.post(reverse("mcp-server-add"), {"name": "nocmd", "transport": "stdio", "args": "[]",
                                                       "env": "{}", "headers": "{}"})  # fmt: skip

    assert response.context["form"].errors["command"] == ["A stdio server needs a command to start."]
    assert 'id="id_command-errors"' in response.content.decode()


def test_http_server_without_a_url_is_refused_on_the_url_field(client):
    signed_in(client, "admin")

    response = client.post(reverse("mcp-server-add"), {"name": "nourl", "transport": "streamable_http",
                                                       "args": "[]", "env": "{}", "headers": "{}"})  # fmt: skip

    assert response.context["form"].errors["url"] == ["A streamable HTTP server needs a URL."]


def test_admin_adds_and_edits_a_server(client):
    signed_in(client, "admin")

    response = client.post(
        reverse("mcp-server-add"),
        {"name": "remote", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp",
         "headers": '{"Authorization": "Bearer abc"}', "args": "", "env": "", "enabled": "on",
         "connection_scope": "per_user"},
    )  # fmt: skip

    assert response.status_code == 302 and response.url == reverse("mcp-server-detail", args=["remote"])
    server = McpServer.objects.get(name="remote")
    assert (server.headers, server.args, server.env, server.enabled) == ({"Authorization": "Bearer abc"}, [], {}, True)
    assert "per session: one per /mcp session" in client.get(reverse("mcp-server-edit", args=["remote"])).text

    response = client.post(
        reverse("mcp-server-edit", args=["remote"]),
        {"name": "remote", "transport": "stdio", "command": sys.executable, "args": '["-m", "x"]', "env": "{}",
         "headers": "{}", "url": "", "connection_scope": "per_session"},
    )  # fmt: skip

    assert response.status_code == 302
    server.refresh_from_db()
    assert (server.transport, server.args, server.enabled) == ("stdio", ["-m", "x"], False)
    assert server.connection_scope == McpServer.ConnectionScope.PER_SESSION


# --- test connection ----------------------------------------------------------------------


def test_test_connection_shows_the_tool_count_and_changes_nothing(client):
    server = generated_server(4)
    signed_in(client, "admin")

    response = client.post(reverse("mcp-server-test", args=[server.name]), headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert "the server lists 4 tools" in response.content.decode()
    assert "<h1>" not in response.content.decode()  # the fragment only
    server.refresh_from_db()
    assert (server.status, server.last_synced_at, Tool.objects.count()) == (McpServer.Status.NEVER, None, 0)


def test_test_connection_shows_the_error(client, tmp_path):
    server = McpServer.objects.create(name="broken", command=str(tmp_path / "no-such-program"))
    signed_in(client, "admin")

    response = client.post(reverse("mcp-server-test", args=[server.name]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Connection failed:" in page and "could not be started" in page
    server.refresh_from_db()
    assert server.status == McpServer.Status.NEVER


# --- sync ---------------------------------------------------------------------------------


def test_sync_button_runs_the_task_and_the_page_shows_counts_and_needs_policy(
    client, eager_celery, django_capture_on_commit_callbacks
):
    server = generated_server(3)
    signed_in(client, "admin")

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("mcp-server-sync", args=[server.name]))

    assert response.status_code == 302
    server.refresh_from_db()
    assert server.sync_phase == McpServer.SyncPhase.DONE and server.status == McpServer.Status.OK
    assert sorted(server.sync_report["new"]) == ["gen_tool_0001", "gen_tool_0002", "gen_tool_0003"]
    page = client.get(response.url).content.decode()
    assert "3 imported, 0 changed, 0 disabled, 0 unchanged" in page
    assert 'href="/catalog/"' in page and 'href="/catalog/gen_tool_0002/"' in page
    assert "hx-trigger" not in page.split('id="sync-progress"')[1]  # done: no more polling


def test_needs_policy_leaves_out_the_tools_that_have_an_active_policy(client, eager_celery):
    server = generated_server(2)
    mcp_sync.sync_server(server)
    make_policy(Tool.objects.get(name="gen_tool_0001"))
    server.sync_report = {**server.sync_report, "new": ["gen_tool_0001", "gen_tool_0002"]}
    server.save()
    signed_in(client, "viewer")

    fragment = client.get(reverse("mcp-server-progress", args=[server.name])).content.decode()

    assert "Needs policy (1)" in fragment and "gen_tool_0002" in fragment
    assert 'href="/catalog/gen_tool_0001/"' not in fragment


def test_needs_policy_shows_the_first_fifty_and_links_to_the_rest(client):
    server = generated_server(60)
    mcp_sync.sync_server(server)
    signed_in(client, "viewer")

    fragment = client.get(reverse("mcp-server-progress", args=[server.name])).content.decode()

    assert "Needs policy (60)" in fragment and fragment.count('href="/catalog/gen_tool_') == 50
    assert "and 10 more" in fragment and 'href="/catalog/?source=mcp&amp;policy=none"' in fragment


def test_progress_fragment_polls_every_second_while_the_sync_runs(client):
    server = generated_server()
    McpServer.objects.filter(pk=server.pk).update(sync_phase=McpServer.SyncPhase.IMPORTING, sync_done=40,
                                                  sync_total=120)  # fmt: skip
    signed_in(client, "viewer")

    fragment = client.get(reverse("mcp-server-progress", args=[server.name])).content.decode()

    assert 'hx-trigger="every 1s"' in fragment and "40 of 120 tools" in fragment
    assert f'hx-get="{reverse("mcp-server-progress", args=[server.name])}"' in fragment


def test_htmx_sync_answers_the_progress_fragment_and_a_second_click_queues_nothing(client, monkeypatch):
    server = generated_server()
    queued = []
    monkeypatch.setattr(sync_mcp_server, "delay_on_commit", queued.append)
    signed_in(client, "admin")

    with_htmx = {"HX-Request": "true"}
    first = client.post(reverse("mcp-server-sync", args=[server.name]), headers=with_htmx)
    second = client.post(reverse("mcp-server-sync", args=[server.name]), headers=with_htmx)

    assert queued == [server.pk]  # the second click found the sync queued
    for response in (first, second):
        fragment = response.content.decode()
        assert fragment.lstrip().startswith('<section id="sync-progress"')
        assert "queued, waiting for a worker" in fragment and 'hx-trigger="every 1s"' in fragment


def test_sync_records_each_phase_and_the_import_count_on_the_row(monkeypatch):
    server = generated_server(5)
    seen = []
    real_progress = mcp_sync._progress

    def spy(server, phase, **fields):
        real_progress(server, phase, **fields)
        row = McpServer.objects.get(pk=server.pk)
        seen.append((row.sync_phase, row.sync_done, row.sync_total))

    monkeypatch.setattr(mcp_sync, "_progress", spy)
    monkeypatch.setattr(mcp_sync, "SYNC_BATCH", 2)

    sync_mcp_server(server.pk)

    assert seen == [("listing", 0, 0), ("importing", 0, 5), ("importing", 2, 5), ("importing", 4, 5),
                    ("importing", 5, 5)]  # fmt: skip
    server.refresh_from_db()
    assert (server.sync_phase, server.sync_done, server.sync_total) == ("done", 5, 5)


def test_a_failed_sync_ends_in_the_error_phase_with_the_reason(client, tmp_path):
    server = McpServer.objects.create(name="broken", command=str(tmp_path / "no-such-program"))

    sync_mcp_server(server.pk)

    server.refresh_from_db()
    assert server.sync_phase == McpServer.SyncPhase.ERROR and "could not be started" in server.sync_report["error"]
    signed_in(client, "viewer")
    fragment = client.get(reverse("mcp-server-progress", args=[server.name])).content.decode()
    assert "Sync failed:" in fragment and "hx-trigger" not in fragment


def test_sync_task_is_idempotent_and_skips_a_deleted_server():
    server = generated_server(3)

    first = sync_mcp_server(server.pk)
    second = sync_mcp_server(server.pk)

    assert first.startswith("3 new") and second == "0 new, 0 changed, 0 disabled, 3 unchanged"
    assert Tool.objects.count() == 3
    assert sync_mcp_server(server.pk + 1000) == "no such MCP server"


def test_a_sync_already_running_is_not_started_twice():
    server = generated_server(3)
    McpServer.objects.filter(pk=server.pk).update(sync_phase=McpServer.SyncPhase.IMPORTING)
    McpServer.objects.filter(pk=server.pk).update(sync_updated_at=timezone.now())

    result = mcp_sync.sync_server(server)

    assert "already running" in result.error and not Tool.objects.exists()


def test_a_sync_stuck_for_longer_than_the_stale_limit_can_be_started_again():
    server = generated_server(3)
    McpServer.objects.filter(pk=server.pk).update(
        sync_phase=McpServer.SyncPhase.IMPORTING, sync_updated_at=timezone.now() - mcp_sync.STALE_SYNC * 2
    )

    assert mcp_sync.sync_server(server).ok
    assert Tool.objects.count() == 3


def test_a_sync_stopped_half_way_keeps_what_it_wrote_and_the_next_sync_completes_it(monkeypatch):
    server = generated_server(5)
    monkeypatch.setattr(mcp_sync, "SYNC_BATCH", 2)
    real_import = mcp_sync._import_batch
    batches = []

    def fail_on_the_second_batch(batch, names, missing, result):
        batches.append(batch)
        if len(batches) == 2:
            raise RuntimeError("database went away")
        real_import(batch, names, missing, result)

    monkeypatch.setattr(mcp_sync, "_import_batch", fail_on_the_second_batch)
    with pytest.raises(RuntimeError):
        mcp_sync.sync_server(server)

    server.refresh_from_db()
    assert server.sync_phase == McpServer.SyncPhase.ERROR and "database went away" in server.sync_report["error"]
    assert server.tool_names == [] and Tool.objects.count() == 2  # the first batch, unpolicied so denied
    monkeypatch.setattr(mcp_sync, "_import_batch", real_import)

    result = mcp_sync.sync_server(server)

    assert result.ok and len(result.new) == 3 and len(result.unchanged) == 2
    server.refresh_from_db()
    assert len(server.tool_names) == 5 and Tool.objects.count() == 5
