"""Every response carries the Content-Security-Policy, and no page needs what it forbids (inline script or style).

The pages are every GET route of the URL resolver (tests/test_permission_matrix.py's RULES and objects), seen
by a superuser, plus a conversation with a real turn (its budget bar), the admin's index, the 404 page and /v1.
"""

import re

import pytest
from django.test import override_settings

from agents.access.api_keys import create_api_key
from agents.models import Conversation, Turn, TurnEvent
from tests.support.builders import make_user
from tests.test_permission_matrix import RULES, make_objects, make_principals

pytestmark = pytest.mark.django_db
# What an HTML page must not carry for the default policy to let it work: inline scripts, inline event handlers,
# style attributes or elements, javascript: URLs.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)
INLINE_STYLE = re.compile(r"<style\b|<[^>]+\sstyle\s*=", re.I)
JAVASCRIPT_URL = re.compile(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", re.I)
PAGE_ROUTES = sorted(route for route, (_url, rules) in RULES.items() if not route.startswith("v1/"))


def assert_policy(response, settings):
    assert response["Content-Security-Policy"] == settings.TOOLHUB_CONTENT_SECURITY_POLICY
    if response.get("Content-Type", "").startswith("text/html"):
        page = response.content.decode()
        for pattern in (INLINE_SCRIPT, INLINE_HANDLER, INLINE_STYLE, JAVASCRIPT_URL):
            assert not pattern.search(page), f"{pattern.pattern} in {page[pattern.search(page).start() :][:200]}"


def test_the_default_policy_forbids_inline_code_and_framing(settings):
    policy = dict(part.strip().split(" ", 1) for part in settings.TOOLHUB_CONTENT_SECURITY_POLICY.split(";"))
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["connect-src"] == "'self'"  # CSP Level 3: 'self' also matches ws:/wss: to this host
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
    assert "unsafe" not in settings.TOOLHUB_CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("route", PAGE_ROUTES)
def test_every_dashboard_page_has_the_policy_and_nothing_inline(client, settings, route):
    users, objects = make_principals(), make_objects()
    url = RULES[route][0].format(**objects)
    client.force_login(users["superuser"])
    assert_policy(client.get(url), settings)
    client.logout()
    assert_policy(client.get(url), settings)  # the login redirect, or the page itself


def test_a_conversation_page_with_its_budget_bar_needs_no_style(client, settings):
    operator = make_user("operator", role="operator")
    turn = Turn.objects.create(conversation=Conversation.objects.create(owner=operator, title="a sum"))
    figures = {"window": 8192, "system": 400, "tools": 900, "knowledge": 0, "memory": 120, "reserve": 1024,
               "free": 5748, "profile": "chat-8k"}  # fmt: skip
    TurnEvent.objects.create(turn=turn, sequence=1, type=TurnEvent.Type.ROUTING, phase="budget", payload=figures)
    client.force_login(operator)
    page = client.get(f"/console/{turn.conversation_id}/")
    assert_policy(page, settings)
    bar = re.search(r'<svg class="budget-bar".*?</svg>', page.content.decode(), re.S).group()
    assert '<rect class="seg seg-system" x="0.00" y="0" width="4.88"' in bar
    assert '<rect class="seg seg-tools" x="4.88" y="0" width="10.99"' in bar


@pytest.mark.parametrize("url", ["/login/", "/admin/", "/no-such-page/", "/static/css/toolhub.css"])
def test_login_admin_error_and_static_answers_have_the_policy(client, settings, url):
    client.force_login(make_principals()["superuser"])
    response = client.get(url)
    assert response["Content-Security-Policy"] == settings.TOOLHUB_CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("url", ["/v1/models", "/v1/models/toolhub", "/v1/no-such-path", "/v1/openapi.json"])
def test_api_answers_have_the_policy(client, settings, url):
    key = create_api_key(user=make_user(), name="csp")[1]
    response = client.get(url, headers={"Authorization": f"Bearer {key}"})
    assert response["Content-Security-Policy"] == settings.TOOLHUB_CONTENT_SECURITY_POLICY


def test_the_policy_is_a_setting_and_may_be_report_only_or_off(client):
    with override_settings(TOOLHUB_CONTENT_SECURITY_POLICY="default-src 'none'", TOOLHUB_CSP_REPORT_ONLY=True):
        response = client.get("/login/")
        assert response["Content-Security-Policy-Report-Only"] == "default-src 'none'"
        assert "Content-Security-Policy" not in response
    with override_settings(TOOLHUB_CONTENT_SECURITY_POLICY=""):
        assert "Content-Security-Policy" not in client.get("/login/")


@pytest.mark.asyncio
async def test_mcp_answers_have_the_policy(settings):
    from toolhub.csp import with_policy

    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def send(message):
        sent.append(message)

    await with_policy(app)({"type": "http", "path": "/mcp"}, None, send)
    assert (b"content-security-policy", settings.TOOLHUB_CONTENT_SECURITY_POLICY.encode()) in sent[0]["headers"]


def test_djangos_debug_error_pages_keep_their_inline_code_and_api_errors_their_policy(client, settings):
    settings.DEBUG = True
    client.force_login(make_user())
    assert "Content-Security-Policy" not in client.get("/no-such-page/")
    assert "Content-Security-Policy" in client.get("/v1/no-such-path")
    assert "Content-Security-Policy" in client.get("/login/")
