"""The MCP servers page in Chromium: Sync queues the task, a real Celery worker runs it, the page shows progress."""

import re
import sys

import pytest
from playwright.sync_api import expect, sync_playwright

from catalog.models import McpServer, Tool
from tests.support.builders import make_user
from tests.support.servers import celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip
PASSWORD = "a-long-test-password"


def test_sync_button_shows_progress_then_the_counts_and_the_tools_needing_a_policy():
    McpServer.objects.create(
        name="generated", command=sys.executable, args=["-m", "tests.support.generated_mcp_server", "--tools", "1000"]
    )
    make_user(username="admin", role="admin", password=PASSWORD)
    env = database_env()
    with celery_worker(env, app), daphne(env) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"{base}/login/?next=/mcp-servers/generated/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.click("button:has-text('Sync')")

        progress = page.locator("#sync-progress")
        # The click answers the running fragment at once; which phases a 1 s poll then catches depends on the
        # host's speed (an import of 1000 tools can finish between two polls), so the counts per phase are
        # checked on the fragment in tests/catalog/web/test_mcp_servers_page.py, not here.
        expect(progress).to_contain_text(re.compile(r"Syncing…"), timeout=10_000)
        expect(progress).to_contain_text("Sync done: 1000 imported, 0 changed, 0 disabled", timeout=120_000)
        expect(progress.get_by_role("link", name="catalog")).to_have_attribute("href", "/catalog/")
        expect(progress.get_by_role("link", name="gen_tool_0001")).to_have_attribute("href", "/catalog/gen_tool_0001/")
        expect(progress).to_contain_text("Needs policy (1000)")
        expect(progress).to_contain_text("and 950 more")
        browser.close()
    assert Tool.objects.filter(is_mcp=True).count() == 1000
    assert McpServer.objects.get(name="generated").sync_phase == McpServer.SyncPhase.DONE
