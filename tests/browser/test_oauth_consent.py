"""Connecting an MCP client with OAuth in a real browser: toolhub's login, then the consent page, under the CSP.

The consent form's answer redirects to the client (a loopback callback here, answered by the test): the page's
Content-Security-Policy must let that redirect through (form-action), which only a browser enforces.
"""

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

from agents.mcp_gateway import oauth
from tests.browser.conftest import NARROW

CALLBACK = "http://127.0.0.1:33419/callback"


def authorize_url(base: str) -> str:
    client = oauth.register_client({"client_name": "Browser MCP client", "redirect_uris": [CALLBACK]})
    challenge = base64.urlsafe_b64encode(hashlib.sha256(secrets.token_bytes(32)).digest()).decode().rstrip("=")
    params = {"response_type": "code", "client_id": client.client_id, "redirect_uri": CALLBACK, "state": "st",
              "code_challenge": challenge, "code_challenge_method": "S256", "scope": "mcp",
              "resource": f"{base}/mcp"}  # fmt: skip
    return f"{base}/oauth/authorize/?{urlencode(params)}"


def test_an_operator_logs_in_allows_and_the_client_gets_its_code(new_page, browser_stack, screenshot):
    page = new_page(viewport=NARROW)
    arrived = []
    page.route(f"{CALLBACK}**", lambda route: (arrived.append(route.request.url), route.fulfill(body="done")))

    page.goto(authorize_url(browser_stack.url))
    assert "/login/" in page.url
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill(browser_stack.password)
    page.get_by_role("button", name="Log in").click()
    heading = page.get_by_role("heading", name="Connect Browser MCP client to toolhub?")
    heading.wait_for()
    assert page.get_by_text("List and call the tools your role allows, over MCP").is_visible()
    screenshot(page, "oauth-consent-390")
    page.get_by_role("button", name="Allow").click()

    page.wait_for_url(f"{CALLBACK}**")
    params = parse_qs(urlsplit(arrived[0]).query)
    assert params["state"] == ["st"] and params["code"] and params["iss"] == [browser_stack.url]


def test_denying_sends_the_client_access_denied(new_page, browser_stack, log_in):
    page = new_page()
    arrived = []
    page.route(f"{CALLBACK}**", lambda route: (arrived.append(route.request.url), route.fulfill(body="done")))
    log_in(page, "viewer")

    page.goto(authorize_url(browser_stack.url))
    assert page.get_by_text("Calling a tool needs the operator role.").is_visible()
    page.get_by_role("button", name="Deny").click()

    page.wait_for_url(f"{CALLBACK}**")
    assert parse_qs(urlsplit(arrived[0]).query)["error"] == ["access_denied"]
