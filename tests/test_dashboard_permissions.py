"""Every catalog dashboard endpoint: anonymous -> login; a viewer reads but gets 403 on every write, htmx or not."""

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from agents.models import RoutingLog
from catalog.models import Domain, KnowledgeSnippet, McpServer, PolicyVersion, Tool, ToolExample
from catalog.policies.versions import record_policy_version
from catalog.web import urls as catalog_urls
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db

PAGES = [
    "/catalog/",
    "/catalog/get_weather/",
    "/policies/",
    "/policies/get_weather/",
    "/policies/get_weather/rollback/1/",
    "/knowledge/",
    "/knowledge/?show=all",
    "/knowledge/export.csv",
    "/knowledge/points-expire/",
]
WRITES = [
    "/policies/get_weather/",
    "/policies/get_weather/always-load",
    "/policies/get_weather/simulate",
    "/policies/get_weather/rollback/1/",
    "/knowledge/points-expire/",
    "/knowledge/points-expire/review",
    "/knowledge/points-expire/review/undo",
]
# Every URL name of these pages, with arguments: each is a read (GET only) or a write (403 without the permission).
READ_NAMES = {"catalog": [], "tool-detail": ["get_weather"], "policies": [], "knowledge": [],
              "knowledge-export": []}  # fmt: skip
WRITE_NAMES = {"policy-detail": ["get_weather"], "policy-simulate": ["get_weather"],
               "policy-always-load": ["get_weather"],
               "policy-rollback": ["get_weather", 1], "knowledge-detail": ["points-expire"],
               "knowledge-review": ["points-expire"], "knowledge-review-undo": ["points-expire"]}  # fmt: skip
# The MCP servers page, the tool page's examples, the decision on a pending policy change, the policy review queue and
# the knowledge bulk actions (their own tests cover what they do, tests/catalog/web/test_policy_four_eyes.py the
# decision; tests/test_permission_matrix.py who gets what from each): a viewer reads the first and is refused every
# write of the others. `example` stands for the fixture's example's id.
OTHER_READ_NAMES = {"mcp-servers": [], "mcp-server-detail": ["demo"], "mcp-server-progress": ["demo"]}
# Where an upstream's authorization server sends the browser back: any signed-in user, answered only for an
# authorization that user's session started (tests/catalog/web/test_mcp_oauth_pages.py).
CALLBACK_NAMES = {"mcp-oauth-callback": []}
OTHER_WRITE_NAMES = {"tool-example-add": ["get_weather"], "tool-example-edit": ["get_weather", "example"],
                     "tool-example-delete": ["get_weather", "example"], "mcp-server-add": [],
                     "mcp-server-edit": ["demo"], "mcp-server-test": ["demo"], "mcp-server-sync": ["demo"],
                     "mcp-server-oauth-connect": ["demo"], "mcp-server-oauth-disconnect": ["demo"],
                     "policy-change-decide": ["get_weather", 1], "knowledge-bulk": [], "policy-review": []}  # fmt: skip
POLICY_POST = {"status": "rejected", "operation": "read", "risk": "low", "domains": ["general"], "note": "deny",
               "base_version": "2", "replay": "5"}  # fmt: skip
SNIPPET_POST = {"title": "Points expire", "text": "Changed.", "source": "handbook", "owner": "team",
                "action": "answer", "review_interval_days": "30"}  # fmt: skip


@pytest.fixture
def data():
    policy = make_policy(make_tool("get_weather"))
    policy.risk = "medium"
    policy.save()
    record_policy_version(policy, note="v2")
    domain = Domain.objects.create(name="loyalty", title="Loyalty")
    snippet = KnowledgeSnippet.objects.create(
        domain=domain, action="answer", title="Points expire", text="Old.", source="handbook", owner="team",
        last_reviewed=timezone.localdate() - datetime.timedelta(days=100), review_interval_days=30,
    )  # fmt: skip
    RoutingLog.objects.create(query="weather", decision={"action": "get", "domains": ["general"], "confidence": 0.9})
    return policy, snippet


def state(policy, snippet):
    """Everything a write could change."""
    policy.refresh_from_db()
    snippet.refresh_from_db()
    return (policy.version, policy.status, policy.risk, PolicyVersion.objects.count(),
            Tool.objects.get(pk=policy.tool_id).always_load,
            KnowledgeSnippet.objects.count(), snippet.last_reviewed, snippet.reviewed_by_id)  # fmt: skip


@pytest.mark.parametrize("url", sorted(set(PAGES + WRITES)))
@pytest.mark.parametrize("method", ["get", "post"])
def test_anonymous_requests_redirect_to_login(client, data, url, method):
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response.url.startswith("/login/?next=")


@pytest.mark.parametrize("url", PAGES)
def test_viewer_reads_every_page(client, data, url):
    client.force_login(make_user("watcher", role="viewer"))
    expected = 403 if "/rollback/" in url else 200  # the rollback confirm page is part of editing
    assert client.get(url).status_code == expected


@pytest.mark.parametrize("htmx", [False, True])
def test_viewer_gets_403_on_every_write_and_nothing_changes(client, data, htmx):
    policy, snippet = data
    client.force_login(make_user("watcher", role="viewer"))
    before = state(policy, snippet)
    headers = {"HX-Request": "true"} if htmx else {}
    for url in WRITES:
        body = SNIPPET_POST if url.startswith("/knowledge/") else POLICY_POST
        assert client.post(url, body, headers=headers).status_code == 403, url
    assert state(policy, snippet) == before


def test_operator_can_use_every_write(client, data):
    policy, snippet = data
    client.force_login(make_user("op", role="operator"))
    statuses = {url: client.post(url, SNIPPET_POST if url.startswith("/knowledge/") else POLICY_POST).status_code
                for url in WRITES}  # fmt: skip
    assert statuses == {
        "/policies/get_weather/": 302,
        "/policies/get_weather/always-load": 302,
        "/policies/get_weather/simulate": 200,
        "/policies/get_weather/rollback/1/": 302,
        "/knowledge/points-expire/": 302,
        "/knowledge/points-expire/review": 302,
        "/knowledge/points-expire/review/undo": 400,  # no signed review in the form
    }


@pytest.mark.parametrize("url", PAGES)
def test_a_user_without_any_role_gets_403(client, data, url):
    client.force_login(get_user_model().objects.create_user("nobody", password="a-long-test-password"))
    assert client.get(url).status_code == 403


def test_a_user_without_a_role_sees_no_request_tool_or_figure_on_the_overview(client, data):
    RoutingLog.objects.create(query="wire 500 euros to mallory", decision={"action": "create", "domains": ["general"]})
    client.force_login(get_user_model().objects.create_user("nobody", password="a-long-test-password"))
    response = client.get("/")
    page = response.content.decode()
    assert response.status_code == 403
    assert "no role" in page and "viewer" in page
    for shown in (
        "mallory",
        "weather",
        "Recent requests",
        "enabled tools",
        "schema tokens",
        "turns in total",
        "Retention",
        "ws/overview",
    ):
        assert shown not in page, shown


def test_a_viewer_sees_the_overview_with_its_requests(client, data):
    RoutingLog.objects.create(query="wire 500 euros to mallory", decision={"action": "create", "domains": ["general"]})
    client.force_login(make_user("watcher", role="viewer"))
    response = client.get("/")
    assert response.status_code == 200 and "mallory" in response.content.decode()


def test_every_catalog_url_is_classified_as_read_or_write():
    """A new endpoint cannot be added without deciding which list (and so which test) it belongs to."""
    names = {pattern.name for pattern in catalog_urls.urlpatterns} | {"policy-simulate"}
    assert names == set(READ_NAMES) | set(WRITE_NAMES) | set(OTHER_READ_NAMES) | set(OTHER_WRITE_NAMES) | set(
        CALLBACK_NAMES
    )
    assert sorted(reverse(name, args=args) for name, args in WRITE_NAMES.items()) == sorted(WRITES)


@pytest.mark.parametrize("name", sorted(READ_NAMES))
def test_read_only_pages_refuse_posts(client, data, name):
    client.force_login(make_user("op", role="operator"))
    assert client.post(reverse(name, args=READ_NAMES[name])).status_code == 405


@pytest.fixture
def others(data):
    example = ToolExample.objects.create(tool=data[0].tool, text="is it raining", text_key="k", approved=True)
    server = McpServer.objects.create(name="demo", command="/bin/false")
    return example, server


def other_url(name: str, example) -> str:
    return reverse(name, args=[example.pk if arg == "example" else arg for arg in OTHER_WRITE_NAMES.get(name, ())]
                   or OTHER_READ_NAMES.get(name, []))  # fmt: skip


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_mcp_server_pages_are_read_by_every_role_and_written_by_none_but_admin(client, others, role):
    example, server = others
    client.force_login(make_user("someone", role=role))
    for name in OTHER_READ_NAMES:
        assert client.get(other_url(name, example)).status_code == 200, name
    for name in (name for name in OTHER_WRITE_NAMES if name.startswith("mcp-")):
        assert client.post(other_url(name, example), {"name": "changed"}).status_code == 403, name
    assert list(McpServer.objects.values_list("name", "command")) == [("demo", "/bin/false")]


def test_viewer_gets_403_on_every_example_write_and_nothing_changes(client, others):
    example, _ = others
    client.force_login(make_user("watcher", role="viewer"))
    for name in (name for name in OTHER_WRITE_NAMES if name.startswith("tool-example")):
        assert client.post(other_url(name, example), {"text": "changed", "approved": ""}).status_code == 403, name
    assert list(ToolExample.objects.values_list("text", "approved")) == [("is it raining", True)]


@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_the_oauth_callback_refuses_an_answer_this_session_did_not_ask_for(client, role):
    client.force_login(make_user("someone", role=role))
    url = reverse("mcp-oauth-callback", args=CALLBACK_NAMES["mcp-oauth-callback"])
    response = client.get(url, {"state": "forged", "code": "stolen"})
    assert response.status_code == 400 and "belongs to no authorization this browser started" in response.text
    assert client.get(url).status_code == 400
