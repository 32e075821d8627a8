"""Who gets what from every endpoint: the matrix is generated from the URL resolver, the WebSocket routes and /mcp.

For each route of `django.urls.get_resolver()` (and of agents.console.websocket_urls's
WebSocket routes) a rule below says the status each principal gets for GET
and for POST: anonymous, a user with no role, viewer, operator, admin (the
roles of toolhub.roles) and a superuser (staff, for the admin site). /v1
routes are called with an API key of that user (default scopes, chat and mcp;
a second table varies the scopes) and /mcp with raw JSON-RPC. A route without
a rule fails `test_every_route_has_a_rule`, and so does a rule for a route
that no longer exists: a new endpoint cannot ship without saying who may use it.

POST bodies are probes chosen so that a caller who gets past authorization
gets a known answer without side effects worth having: an unknown model (404)
for chat, an already decided approval (409), an empty form (the view's own
400/200/302). The Django admin site is one rule for all its routes: staff
only, everyone else is sent to the admin's login.
"""

import copy
import json
from dataclasses import dataclass
from http.cookies import SimpleCookie

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import connections, transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from agents.access.api_keys import create_api_key
from agents.console.consumers import FORBIDDEN
from agents.console.websocket_urls import websocket_urlpatterns
from agents.models import ApiKey, Conversation, RoutingLog, ServerQuestion, ToolApproval, Turn, Workflow
from catalog.models import Domain, KnowledgeSnippet, McpServer, PolicyChangeRequest, ToolExample
from catalog.policies.versions import record_policy_version, snapshot
from tests.support.builders import FAST_PASSWORD_HASHERS, make_policy, make_tool, make_user
from tests.support.mcp_asgi import McpAsgiClient

PRINCIPALS = ("anonymous", "norole", "viewer", "operator", "admin", "superuser")
ROLES = ("viewer", "operator", "admin")
CALC_SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


def each(anonymous, norole, viewer, operator, admin, superuser=None) -> dict[str, int]:
    """Expected status per principal (the superuser gets what admin gets unless told)."""
    values = (anonymous, norole, viewer, operator, admin, admin if superuser is None else superuser)
    return dict(zip(PRINCIPALS, values, strict=True))


def everyone(status: int) -> dict[str, int]:
    return each(status, status, status, status, status)


def signed_in(status: int, anonymous: int = 302) -> dict[str, int]:
    return each(anonymous, status, status, status, status)


def needs(role: str, ok: int, *, refused: int = 403, anonymous: int = 302) -> dict[str, int]:
    """`ok` from `role` up (viewer < operator < admin), `refused` below it, the login page for anonymous."""
    allowed = ROLES[ROLES.index(role) :]
    return each(anonymous, refused, *(ok if r in allowed else refused for r in ROLES))


# route (as the resolver spells it) -> (the URL to request, {"GET": statuses, "POST": statuses}).
# {names} in a URL are filled from the fixture's objects.
RULES = {
    "favicon.ico": ("/favicon.ico", {"GET": everyone(302), "POST": everyone(405)}),  # to the static icon
    # off without TOOLHUB_METRICS_TOKEN whoever is signed in; with it, the token decides (tests/agents/observability)
    "metrics": ("/metrics", {"GET": everyone(404), "POST": everyone(405)}),
    "login/": ("/login/", {"GET": signed_in(302, anonymous=200), "POST": signed_in(302, anonymous=200)}),
    "logout/": ("/logout/", {"GET": everyone(405), "POST": everyone(302)}),
    # the overview shows request texts and figures: a user without a role gets a page that says so, and nothing else
    "": ("/", {"GET": needs("viewer", 200), "POST": needs("viewer", 200)}),
    # catalog
    "catalog/": ("/catalog/", {"GET": needs("viewer", 200), "POST": needs("viewer", 405)}),
    "catalog/<tool:name>/": ("/catalog/get_weather/", {"GET": needs("viewer", 200), "POST": needs("viewer", 405)}),
    "catalog/<tool:name>/examples/": (
        "/catalog/get_weather/examples/",
        {"GET": signed_in(405), "POST": needs("operator", 400)},
    ),
    "catalog/<tool:name>/examples/<int:pk>/": (
        "/catalog/get_weather/examples/{example}/",
        {"GET": signed_in(405), "POST": needs("operator", 302)},
    ),
    "catalog/<tool:name>/examples/<int:pk>/delete/": (
        "/catalog/get_weather/examples/{example}/delete/",
        {"GET": signed_in(405), "POST": needs("operator", 302)},
    ),
    "policies/": ("/policies/", {"GET": needs("viewer", 200), "POST": needs("viewer", 405)}),
    "policies/<tool:name>/": ("/policies/get_weather/", {"GET": needs("viewer", 200), "POST": needs("operator", 200)}),
    "policies/<tool:name>/rollback/<int:number>/": (
        "/policies/get_weather/rollback/1/",
        {"GET": needs("operator", 200), "POST": needs("operator", 302)},
    ),
    "policies/<tool:name>/changes/<int:pk>/": (  # the probe names no decision: a message, back to the policy
        "/policies/get_weather/changes/{policy_change}/",
        {"GET": needs("operator", 405), "POST": needs("operator", 302)},
    ),
    "policies/<tool:name>/always-load": (  # the probe sends no box: the tool is left (or set) not always loaded
        "/policies/get_weather/always-load",
        {"GET": needs("operator", 405), "POST": needs("operator", 302)},
    ),
    "policies/-/review/": (  # the queue: viewers read it; the probe decides nothing (no tool chosen), a 400
        "/policies/-/review/",
        {"GET": needs("viewer", 200), "POST": needs("operator", 400)},
    ),
    "policies/<tool:name>/simulate": (
        "/policies/get_weather/simulate",
        {"GET": needs("operator", 405), "POST": needs("operator", 200)},
    ),
    "knowledge/": ("/knowledge/", {"GET": needs("viewer", 200), "POST": needs("viewer", 405)}),
    "knowledge/export.csv": ("/knowledge/export.csv", {"GET": needs("viewer", 200), "POST": needs("viewer", 405)}),
    "knowledge/bulk": (  # the probe chooses no snippet and no action: a 400, nothing changed
        "/knowledge/bulk",
        {"GET": needs("operator", 405), "POST": needs("operator", 400)},
    ),
    "knowledge/<slug:key>/": (
        "/knowledge/points-expire/",
        {"GET": needs("viewer", 200), "POST": needs("operator", 200)},
    ),
    "knowledge/<slug:key>/review": (
        "/knowledge/points-expire/review",
        {"GET": needs("operator", 405), "POST": needs("operator", 302)},
    ),
    "knowledge/<slug:key>/review/undo": (  # the probe has no signed review: 400 once past the permission
        "/knowledge/points-expire/review/undo",
        {"GET": needs("operator", 405), "POST": needs("operator", 400)},
    ),
    "mcp-servers/": ("/mcp-servers/", {"GET": needs("viewer", 200), "POST": needs("viewer", 200)}),
    "mcp-servers/add/": ("/mcp-servers/add/", {"GET": needs("admin", 200), "POST": needs("admin", 200)}),
    "mcp-servers/<slug:name>/": ("/mcp-servers/demo/", {"GET": needs("viewer", 200), "POST": needs("viewer", 200)}),
    "mcp-servers/<slug:name>/edit/": (
        "/mcp-servers/demo/edit/",
        {"GET": needs("admin", 200), "POST": needs("admin", 200)},
    ),
    "mcp-servers/<slug:name>/test/": (
        "/mcp-servers/demo/test/",
        {"GET": everyone(405), "POST": needs("admin", 200)},
    ),
    "mcp-servers/<slug:name>/sync/": (
        "/mcp-servers/demo/sync/",
        {"GET": everyone(405), "POST": needs("admin", 302)},
    ),
    "mcp-servers/<slug:name>/progress/": (
        "/mcp-servers/demo/progress/",
        {"GET": needs("viewer", 200), "POST": needs("viewer", 200)},
    ),
    # toolhub's own OAuth account on a server: admins connect it (an unreachable URL: the page says so, 302 to it)
    "mcp-servers/<slug:name>/oauth/connect/": (
        "/mcp-servers/oauthdemo/oauth/connect/",
        {"GET": everyone(405), "POST": needs("admin", 302)},
    ),
    "mcp-servers/<slug:name>/oauth/disconnect/": (
        "/mcp-servers/oauthdemo/oauth/disconnect/",
        {"GET": everyone(405), "POST": needs("admin", 302)},
    ),
    # the authorization server's answer: the probe's state belongs to no authorization this session started
    "mcp-servers/-/oauth-callback/": (
        "/mcp-servers/-/oauth-callback/?state=unknown&code=x",
        {"GET": signed_in(400), "POST": everyone(405)},
    ),
    # agents
    "console/": ("/console/", {"GET": needs("viewer", 200), "POST": needs("operator", 400)}),
    "console/<int:conversation_id>/": (
        "/console/{conversation}/",
        # only the conversation's owner adds to it, and the owner here is another user
        {"GET": needs("viewer", 200), "POST": signed_in(403)},
    ),
    "console/search/": ("/console/search/?q=sum&status=done", {"GET": needs("viewer", 200), "POST": everyone(405)}),
    "console/tools/<tool:name>/": (
        "/console/tools/get_weather/",
        {"GET": needs("viewer", 200), "POST": everyone(405)},
    ),
    "routing/": ("/routing/", {"GET": needs("viewer", 200), "POST": everyone(405)}),
    "routing/<int:log_id>/": ("/routing/{log}/", {"GET": needs("viewer", 200), "POST": everyone(405)}),
    "workflows/": ("/workflows/", {"GET": needs("viewer", 200), "POST": everyone(405)}),
    "workflows/<int:workflow_id>/cancel": (
        "/workflows/{workflow}/cancel",
        {"GET": everyone(405), "POST": needs("operator", 302)},
    ),
    "approvals/": ("/approvals/", {"GET": needs("viewer", 200), "POST": everyone(405)}),
    "approvals/<int:approval_id>/decide": (
        "/approvals/{approval}/decide",
        {"GET": everyone(405), "POST": needs("operator", 302)},
    ),
    # an MCP server's question (answered already: the probe's decline is a message, back to the conversation)
    "console/questions/<int:question_id>/": (
        "/console/questions/{question}/",
        {"GET": needs("viewer", 200), "POST": needs("operator", 302)},
    ),
    "console/turns/<int:turn_id>/cancel": (
        "/console/turns/{turn}/cancel",
        {"GET": everyone(405), "POST": needs("operator", 302)},
    ),
    # one's own settings (the time zone): whoever is signed in, no role needed; the probe saves "follow my browser"
    "account/": ("/account/", {"GET": signed_in(200), "POST": signed_in(302)}),
    # the API: a key of the principal (anonymous: no key)
    "v1/chat/completions": (
        "/v1/chat/completions",
        {"GET": everyone(405), "POST": needs("operator", 404, anonymous=401)},
    ),
    "v1/openapi.json": ("/v1/openapi.json", {"GET": everyone(200), "POST": everyone(405)}),
    "v1/models": ("/v1/models", {"GET": needs("viewer", 200, anonymous=401), "POST": everyone(405)}),
    "v1/models/<str:model_id>": (
        "/v1/models/toolhub",
        {"GET": needs("viewer", 200, anonymous=401), "POST": everyone(405)},
    ),
    "v1/approvals/<int:approval_id>": (
        "/v1/approvals/{approval}",
        {"GET": everyone(405), "POST": needs("operator", 409, anonymous=401)},
    ),
    # OAuth for /mcp (agents.mcp_gateway.oauth_urls): public metadata and token endpoints (a probe without a client
    # gets the
    # library's 400), client registration (an empty body is refused metadata), consent for a signed-in user only.
    ".well-known/oauth-authorization-server": (
        "/.well-known/oauth-authorization-server",
        {"GET": everyone(200), "POST": everyone(405)},
    ),
    ".well-known/oauth-protected-resource": (
        "/.well-known/oauth-protected-resource",
        {"GET": everyone(200), "POST": everyone(405)},
    ),
    ".well-known/oauth-protected-resource/mcp": (
        "/.well-known/oauth-protected-resource/mcp",
        {"GET": everyone(200), "POST": everyone(405)},
    ),
    "oauth/authorize/": ("/oauth/authorize/", {"GET": signed_in(400), "POST": signed_in(200)}),
    "oauth/token/": ("/oauth/token/", {"GET": everyone(405), "POST": everyone(400)}),
    "oauth/revoke/": ("/oauth/revoke/", {"GET": everyone(405), "POST": everyone(400)}),
    "oauth/register": ("/oauth/register", {"GET": everyone(405), "POST": everyone(400)}),
}
ADMIN_PREFIX = "admin/"  # Django's admin site: staff only (its login page excepted)
# The admin's own login answers everyone (a signed-in staff member is sent on to the index); its logout is for
# staff (POST only), others go to its login.
ADMIN_OPEN = {
    "admin/login/": {"GET": each(200, 200, 200, 200, 200, superuser=302), "POST": everyone(200)},
    "admin/logout/": {"GET": each(302, 302, 302, 302, 302, superuser=405), "POST": everyone(302)},
}
POST_BODIES = {
    "v1/chat/completions": {"model": "no-such-model", "messages": [{"role": "user", "content": "What is 2 + 2?"}]},
    "v1/approvals/<int:approval_id>": {"approve": True},
    "approvals/<int:approval_id>/decide": {"decision": "approve"},
    "console/": {"message": ""},
    "console/questions/<int:question_id>/": {"decision": "decline"},
}


def routes(patterns=None, prefix=""):
    """Every route of the resolver, as `prefix + pattern` strings."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


ROUTES = sorted(set(routes()))
WEBSOCKET_ROUTES = sorted(str(pattern.pattern) for pattern in websocket_urlpatterns)
WEBSOCKET_RULES = {
    "ws/console/": ("/ws/console/", needs("viewer", True, refused=FORBIDDEN, anonymous=FORBIDDEN)),
    "ws/console/<int:conversation_id>/": (
        "/ws/console/{conversation}/",
        needs("viewer", True, refused=FORBIDDEN, anonymous=FORBIDDEN),
    ),
    "ws/overview/": ("/ws/overview/", needs("viewer", True, refused=FORBIDDEN, anonymous=FORBIDDEN)),
    "ws/approvals/": ("/ws/approvals/", needs("viewer", True, refused=FORBIDDEN, anonymous=FORBIDDEN)),
}


def test_every_route_has_a_rule_and_every_rule_a_route():
    ruled = set(RULES) | {route for route in ROUTES if route.startswith(ADMIN_PREFIX)}
    assert set(ROUTES) - ruled == set(), "new endpoints need a row in RULES (who may use them)"
    assert set(RULES) - set(ROUTES) == set(), "RULES names routes that no longer exist"
    assert set(WEBSOCKET_ROUTES) == set(WEBSOCKET_RULES)
    assert set(ADMIN_OPEN) <= set(ROUTES)


# --- the principals and the objects the URLs name -----------------------------------------------


def make_principals() -> dict:
    users = {"anonymous": None}
    users["norole"] = get_user_model().objects.create_user("norole", password="a-long-test-password")
    for role in ROLES:
        users[role] = make_user(role, role=role)
    users["superuser"] = get_user_model().objects.create_superuser("root", password="a-long-test-password")
    return users


def make_objects() -> dict:
    policy = make_policy(make_tool("get_weather"))
    policy.risk = "medium"
    policy.save()
    record_policy_version(policy, note="v2")
    make_policy(make_tool("calculate", input_schema=CALC_SCHEMA, always_load=True))
    domain = Domain.objects.create(name="loyalty", title="Loyalty")
    KnowledgeSnippet.objects.create(domain=domain, action="answer", title="Points expire", text="Old.",
                                    source="handbook", owner="team", last_reviewed=timezone.localdate())  # fmt: skip
    example = ToolExample.objects.create(tool=policy.tool, text="is it raining", text_key="k", approved=True)
    McpServer.objects.create(name="demo", command="/bin/false")
    McpServer.objects.create(name="oauthdemo", transport=McpServer.Transport.STREAMABLE_HTTP,
                             url="http://127.0.0.1:9/mcp", oauth=McpServer.OAuth.SERVICE_BROWSER)  # fmt: skip
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner, title="a sum")
    turn = Turn.objects.create(conversation=conversation)
    log = RoutingLog.objects.create(query="weather", decision={"action": "get", "domains": ["general"]})
    workflow = Workflow.objects.create(conversation=conversation, owner=owner, kind="k", phase="p",
                                       expires_at=timezone.now() + timezone.timedelta(hours=1))  # fmt: skip
    approval = ToolApproval.objects.create(turn=turn, tool_call_id="c1", tool_name="get_weather", risk="medium",
                                           status=ToolApproval.Status.APPROVED, expires_at=timezone.now())  # fmt: skip
    question = ServerQuestion.objects.create(turn=turn, message="Sure?", requested_schema={"type": "object"},
                                             status=ServerQuestion.Status.ANSWERED, answer={},
                                             expires_at=timezone.now())  # fmt: skip
    change = PolicyChangeRequest.objects.create(tool=policy.tool, draft=snapshot(policy), base_version=policy.version,
                                                requested_by=owner)  # fmt: skip
    return {"example": example.pk, "conversation": conversation.pk, "log": log.pk, "workflow": workflow.pk,
            "approval": approval.pk, "turn": turn.pk, "policy_change": change.pk,
            "question": question.pk}  # fmt: skip


@dataclass(frozen=True)
class World:
    """The principals, their signed-in sessions' cookies and the ids of the objects the URLs name."""

    users: dict
    objects: dict
    sessions: dict


@pytest.fixture(scope="class")
def world(django_db_setup, django_db_blocker):
    """One World for the route matrix's ~190 tests, made once as TestCase.setUpTestData does: each test's own
    transaction (pytest-django's) is a savepoint inside this block, so the next test meets the same rows, and the
    block is rolled back after the class's last test."""
    with django_db_blocker.unblock(), override_settings(PASSWORD_HASHERS=FAST_PASSWORD_HASHERS), transaction.atomic():
        users, objects = make_principals(), make_objects()
        sessions = {}
        for user in users.values():
            if user is not None:
                signing_in = Client()
                signing_in.force_login(user)
                sessions[user.pk] = signing_in.cookies
        yield World(users, objects, sessions)
        transaction.set_rollback(True)


def request(client, user, method: str, route: str, url: str, sessions: dict):
    """One request as `user`; what it writes is rolled back, so every principal meets the same objects.

    A principal's requests carry a fresh copy of its session's cookie (`sessions`, by user id; the session was
    made before the rolled-back block): a request that logs out or rotates the session changes neither the stored
    session nor the next request's cookie."""
    cookies = sessions[user.pk] if user is not None and not route.startswith("v1/") else SimpleCookie()
    with transaction.atomic():
        client.cookies = copy.deepcopy(cookies)
        response = _request(client, user, method, route, url)
        transaction.set_rollback(True)
    return response


def _request(client, user, method: str, route: str, url: str):
    headers = {}
    if route.startswith("v1/") and user is not None:
        headers["Authorization"] = f"Bearer {create_api_key(user=user, name='matrix')[1]}"
    if method == "GET":
        return client.get(url, headers=headers)
    if route in POST_BODIES and route.startswith("v1/"):
        return client.post(url, json.dumps(POST_BODIES[route]), content_type="application/json", headers=headers)
    return client.post(url, POST_BODIES.get(route, {}), headers=headers)


def admin_url(route: str) -> str:
    """A concrete URL for an admin route: object ids 1, the app list of `agents`, a made-up catch-all path."""
    url = route.replace("<path:content_type_id>", "1").replace("<path:object_id>", "1").replace("<id>", "1")
    url = url.replace("^(?P<app_label>auth|catalog|agents)/$", "agents/").replace("(?P<url>.*)$", "no-such-page/")
    return "/" + url


@pytest.mark.django_db
class TestRoutes:
    """The matrix over every route of the resolver; its tests share one World (the class-scoped fixture)."""

    @pytest.mark.parametrize("route", ROUTES)
    def test_each_principal_gets_the_status_its_rule_says(self, client, world, route):
        if route.startswith(ADMIN_PREFIX):
            check_admin_route(client, world, route)
            return
        assert route in RULES, f"no rule for the new endpoint {route!r}: add it to RULES"
        url, expected = RULES[route]
        got = {
            method: {
                name: request(client, user, method, route, url.format(**world.objects), world.sessions).status_code
                for name, user in world.users.items()
            }  # fmt: skip
            for method in expected
        }
        assert got == expected, json.dumps(got)


def check_admin_route(client, world, route):
    url = admin_url(route)
    if route in ADMIN_OPEN:
        got = {method: {name: request(client, user, method, route, url, world.sessions).status_code
                        for name, user in world.users.items()}
               for method in ADMIN_OPEN[route]}  # fmt: skip
        assert got == ADMIN_OPEN[route], json.dumps(got)
        return
    for method in ("GET", "POST"):
        for name, user in world.users.items():
            response = request(client, user, method, route, url, world.sessions)
            if name == "superuser":
                assert response.status_code < 500 and "/admin/login/" not in response.get("Location", ""), method
            else:
                assert response.status_code == 302, (method, name)
                assert response["Location"].startswith("/admin/login/"), (method, name)


# --- API keys' scopes on /v1 ----------------------------------------------------------------------

SCOPED = {  # scopes of an operator's key -> status of (GET /v1/models, POST /v1/chat/completions, POST approval)
    ("chat",): (200, 404, 409),
    ("mcp",): (403, 403, 403),
    ("read",): (200, 403, 403),
    ("chat", "mcp"): (200, 404, 409),
    ("mcp", "read"): (200, 403, 403),
}


@pytest.mark.django_db
@pytest.mark.parametrize("scopes", sorted(SCOPED))
def test_an_operators_key_gets_what_its_scopes_allow_on_v1(client, scopes):
    objects = make_objects()
    key = create_api_key(user=make_user("op", role="operator"), name="scoped", scopes=scopes)[1]
    headers = {"Authorization": f"Bearer {key}"}

    def post(url, body):
        return client.post(url, json.dumps(body), content_type="application/json", headers=headers).status_code

    got = (
        client.get("/v1/models", headers=headers).status_code,
        post("/v1/chat/completions", POST_BODIES["v1/chat/completions"]),
        post(f"/v1/approvals/{objects['approval']}", POST_BODIES["v1/approvals/<int:approval_id>"]),
    )
    assert got == SCOPED[scopes]


# --- approval ids cannot be probed: the permission is checked before the id is looked up -------------------------

MISSING_APPROVAL = 999_999


def decide_statuses(client, user, approval_id: int) -> tuple[int, int]:
    """(dashboard POST /approvals/<id>/decide, POST /v1/approvals/<id> with a key of `user`)."""
    client.force_login(user)
    dashboard = client.post(f"/approvals/{approval_id}/decide", {"decision": "approve"}).status_code
    key = create_api_key(user=user, name="probe")[1]
    api = client.post(f"/v1/approvals/{approval_id}", json.dumps({"approve": True}), content_type="application/json",
                      headers={"Authorization": f"Bearer {key}"}).status_code  # fmt: skip
    return dashboard, api


@pytest.mark.django_db
def test_who_may_not_decide_gets_403_for_any_approval_id_existing_or_not(client):
    objects = make_objects()
    users = make_principals()
    got = {name: (decide_statuses(client, users[name], objects["approval"]),
                  decide_statuses(client, users[name], MISSING_APPROVAL))
           for name in ("norole", "viewer", "operator")}  # fmt: skip
    assert got == {
        "norole": ((403, 403), (403, 403)),
        "viewer": ((403, 403), (403, 403)),
        "operator": ((302, 409), (404, 404)),  # the approval was decided already (409; the dashboard redirects)
    }


@pytest.mark.django_db
def test_a_conversations_owner_decides_its_approvals_and_cannot_probe_others(client):
    viewer = make_user("watcher", role="viewer")
    turn = Turn.objects.create(conversation=Conversation.objects.create(owner=viewer, title="mine"))
    own = ToolApproval.objects.create(turn=turn, tool_call_id="c1", tool_name="get_weather", risk="medium",
                                      expires_at=timezone.now() + timezone.timedelta(minutes=5))  # fmt: skip
    others = make_objects()["approval"]
    assert decide_statuses(client, viewer, MISSING_APPROVAL) == (403, 403)
    assert decide_statuses(client, viewer, others) == (403, 403)
    assert decide_statuses(client, viewer, own.pk) == (302, 409)  # approved from the dashboard, then closed
    own.refresh_from_db()
    assert own.status == ToolApproval.Status.APPROVED and own.decided_by == viewer


# --- /mcp (routed by path before Django) ------------------------------------------------------------

MCP_STEPS = ("initialize", "tools/list", "tools/call")
MCP_RULES = {  # principal (key of that user, default scopes) -> statuses of MCP_STEPS
    "anonymous": (401, 401, 401),
    "norole": (403, 403, 403),
    "viewer": (200, 200, 403),
    "operator": (200, 200, 200),
    "admin": (200, 200, 200),
    "superuser": (200, 200, 200),
}
MCP_SCOPED = {  # an operator's key with these scopes
    ("chat",): (403, 403, 403),
    ("mcp",): (200, 200, 200),
    ("read",): (200, 200, 403),
}


async def mcp_statuses(endpoint, key) -> tuple[int, ...]:
    client = McpAsgiClient(endpoint, key)
    statuses = [(await client.initialize()).status, (await client.list_tools()).status]
    statuses.append((await client.call_tool("calculate", {"expression": "6 * 7"})).status)
    return tuple(statuses)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_each_principals_key_gets_what_its_mcp_rule_says(mcp_endpoint):
    def keys():
        make_objects()
        users = make_principals()
        return {name: user and create_api_key(user=user, name="mcp")[1] for name, user in users.items()}

    by_principal = await sync_to_async(keys)()
    got = {name: await mcp_statuses(mcp_endpoint, key) for name, key in by_principal.items()}
    assert got == MCP_RULES


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_operators_key_gets_what_its_scopes_allow_on_mcp(mcp_endpoint):
    def keys():
        make_objects()
        operator = make_user("op", role="operator")
        return {scopes: create_api_key(user=operator, name="mcp", scopes=scopes)[1] for scopes in MCP_SCOPED}

    by_scopes = await sync_to_async(keys)()
    got = {scopes: await mcp_statuses(mcp_endpoint, key) for scopes, key in by_scopes.items()}
    assert got == MCP_SCOPED


# --- WebSockets ------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", WEBSOCKET_ROUTES)
async def test_each_principal_gets_the_websocket_its_rule_says(route):
    assert route in WEBSOCKET_RULES, f"no rule for the new WebSocket route {route!r}"
    path, expected = WEBSOCKET_RULES[route]
    objects = await sync_to_async(make_objects)()
    users = await sync_to_async(make_principals)()
    got = {}
    for name, user in users.items():
        socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path.format(**objects))
        socket.scope["user"] = user or AnonymousUser()
        connected, code = await socket.connect()
        got[name] = True if connected else code
        if connected:
            await socket.disconnect()
    await sync_to_async(connections.close_all)()
    assert got == expected, json.dumps(got)


def test_keys_default_to_the_scopes_the_matrix_assumes():
    assert ApiKey.DEFAULT_SCOPES == ("chat", "mcp")


@pytest.fixture(autouse=True)
def cheap_work(counted_embedder):
    """An edited example is embedded by the bag-of-words stand-in, not the dense model."""
