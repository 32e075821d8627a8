"""An OAuth-protected upstream MCP server, end to end: an admin connects it in Chromium from its page on Daphne
(the browser goes to the server's authorization server and comes back to toolhub's callback), a Celery worker
syncs it with the stored token, and, once the token nears its expiry, syncs again on the same connection with a
refreshed one; errors (a refused scope, an endpoint on another host, huge metadata) show on the page. The upstream
and its authorization server (tests/support/oauth_upstream.py) run in this process."""

import time

import pytest
from django.db import connection, connections
from playwright.sync_api import expect, sync_playwright

from catalog.mcp_oauth.auth import EXPIRY_MARGIN_SECONDS
from catalog.models import McpOAuthGrant, McpServer, Tool
from tests.browser.test_accessibility import violations_of
from tests.support.builders import make_user
from tests.support.oauth_upstream import start_upstream
from tests.support.servers import celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip
PASSWORD = "a-long-test-password"
ACCESS_SECONDS = EXPIRY_MARGIN_SECONDS + 5  # the upstream's tokens: refreshed 5 s after they are issued


@pytest.fixture
def upstream():
    upstream, server = start_upstream()
    yield upstream
    server.should_exit = True


def test_an_admin_connects_an_oauth_server_in_the_browser_and_the_worker_syncs_and_refreshes(upstream, monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the test reads rows between its steps.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    McpServer.objects.create(name="guarded", transport=McpServer.Transport.STREAMABLE_HTTP, url=upstream.url,
                             oauth=McpServer.OAuth.SERVICE_BROWSER)  # fmt: skip
    make_user(username="admin", role="admin", password=PASSWORD)
    upstream.behaviour.access_seconds = ACCESS_SECONDS
    env = database_env()
    with celery_worker(env, app), daphne(env) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"{base}/login/?next=/mcp-servers/guarded/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")

        page.click("button:has-text('Sync')")  # not connected yet: the sync says what to do
        progress = page.locator("#sync-progress")
        expect(progress).to_contain_text("needs OAuth and is not connected: connect it on its page", timeout=60_000)

        page.get_by_role("button", name="Connect", exact=True).click()  # to the authorization server and back
        expect(page.locator("body")).to_contain_text("guarded is connected with toolhub's account (scopes: tools)")
        assert violations_of(page) == []  # the page the callback lands on (tests/browser/test_accessibility.py)
        grant = McpOAuthGrant.objects.get()
        token = grant.tokens["access_token"]
        assert token not in page.content()
        with connection.cursor() as cursor:
            cursor.execute("SELECT tokens FROM catalog_mcpoauthgrant")
            assert token not in cursor.fetchone()[0]

        page.click("button:has-text('Sync')")
        expect(progress).to_contain_text("Sync done: 1 imported", timeout=60_000)
        assert Tool.objects.filter(name="echo", is_mcp=True).exists()
        assert upstream.mcp_authorizations[-1] == f"Bearer {token}"

        # The token nears its expiry while the worker's connection stays open: its next request refreshes it first.
        time.sleep(ACCESS_SECONDS - EXPIRY_MARGIN_SECONDS + 1)
        page.reload()
        page.click("button:has-text('Sync')")
        expect(progress).to_contain_text("Sync done: 0 imported", timeout=60_000)
        grant.refresh_from_db()
        assert upstream.grants == ["authorization_code", "refresh_token"]
        assert grant.tokens["access_token"] != token and grant.refreshed_at is not None

        # A refused scope is named on the page.
        upstream.behaviour.required_scope = "admin"
        page.reload()
        page.click("button:has-text('Sync')")
        expect(progress).to_contain_text("lacks the scope admin", timeout=60_000)

        # Bad answers from the authorization server while connecting again: said on the page, nothing stored.
        upstream.behaviour.token_endpoint = "https://elsewhere.example/token"
        page.get_by_role("button", name="Connect again", exact=True).click()
        expect(page.locator("body")).to_contain_text("Connecting guarded failed: The authorization server")
        expect(page.locator("body")).to_contain_text("names a token_endpoint on another host")
        assert violations_of(page) == []  # the callback's error page
        upstream.behaviour.token_endpoint = ""
        upstream.behaviour.metadata_padding = 10 * 1024 * 1024
        page.get_by_role("button", name="Connect again", exact=True).click()
        expect(page.locator("body")).to_contain_text("more than the 262,144 toolhub reads")
        assert McpOAuthGrant.objects.get().tokens == grant.tokens
        browser.close()
        connections.close_all()  # the reads above, beside Playwright's loop, opened a connection of their own
