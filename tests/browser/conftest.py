"""Browser tests: Debian's Chromium (Playwright) against a real Daphne, Celery worker, Redis and PostgreSQL.

The browser tests of a pytest process share one running stack (`browser_stack`: Daphne
and a Celery worker on the test database, on a Celery queue of their own). Each test is transactional: it starts
with the demo catalog, the demo Loyalty MCP server, model profiles and one
user per role (`viewer`, `operator`, `admin`), committed so the servers see
them, and whatever the test writes through the ORM is committed too;
pytest-django empties the tables after it. Never `playwright install`: the
browser is /usr/bin/chromium (make test installs it).
"""

import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.builders import restore_migrated_routing_data
from tests.support.servers import ROOT, celery_worker, daphne, database_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
ROLES = ("viewer", "operator", "admin")
PASSWORD = "browser-test-password"
WIDE = {"width": 1280, "height": 800}
WIDEST = {"width": 1440, "height": 900}  # the accessibility check's and the docs' wide screenshots
# How long an assertion waits for a turn to end: the first turn of a fresh worker waits for the router's warm-up
# (over 20 s on a loaded host), far past expect()'s own 5 s.
TURN_ENDS_MS = 60_000
NARROW = {"width": 390, "height": 844}


def pytest_collection_modifyitems(items):  # integration tests, as is the folder (tests/conftest.py)
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.django_db(transaction=True))


@dataclass(frozen=True)
class BrowserStack:
    url: str
    env: dict
    data_dir: Path
    password: str = PASSWORD


def load_stack_data(data_dir: Path) -> None:
    """What `make run` sets up, with one user per role instead of a printed login.

    The demo part is the module's first load, then copied (tests/support/demo_snapshot.py: ~3 s a test less); the users
    are made in each test (the role groups take the permissions of this database state) with one password hash.
    """
    from django.contrib.auth import get_user_model

    from tests.support.demo_snapshot import replayed
    from toolhub.roles import ensure_groups

    replayed("browser-stack", lambda: _load_demo(data_dir), str(data_dir))
    groups = ensure_groups()
    for role in ROLES:
        user = get_user_model().objects.create(username=role, password=_password_hash())
        user.groups.add(groups[role])


def _load_demo(data_dir: Path) -> None:
    from agents.models import ModelProfile
    from agents.router import prepare_vectors
    from catalog.mcp_client.sync import sync_server
    from catalog.models import McpServer
    from demo.catalog import load_demo_catalog
    from demo.data.knowledge import MODEL_PROFILES

    restore_migrated_routing_data()  # as migrated; the flush of an earlier transactional test removes them
    load_demo_catalog()
    server = McpServer.objects.create(
        name="loyalty",
        transport=McpServer.Transport.STDIO,
        command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(data_dir / "loyalty-mcp.sqlite3")],
    )
    result = sync_server(server)
    assert result.ok, result.summary()
    for profile in MODEL_PROFILES:
        ModelProfile.objects.get_or_create(name=profile["name"], defaults=profile)
    prepare_vectors()  # as setup_demo: the stack's worker finds every vector stored


@functools.cache
def _password_hash() -> str:
    """PASSWORD hashed once with the deployment's hasher (the servers check it; a hash costs ~0.3 s)."""
    from django.contrib.auth.hashers import make_password

    return make_password(PASSWORD)


@pytest.fixture(scope="session")
def browser_stack(django_db_setup, tmp_path_factory):
    """A live toolhub (Daphne + Celery worker) on the test database, shared by the browser tests of this pytest
    process (started once, not once a module: each start warms its router for 10-20 s). Its Celery queue is its
    own, so the idle worker never takes a task of the workers that other integration tests start between."""
    from django.conf import settings

    data_dir = tmp_path_factory.mktemp("browser-stack")
    env = database_env(
        TOOLHUB_DATA_DIR=str(data_dir), TOOLHUB_CELERY_QUEUE=f"{settings.CELERY_TASK_DEFAULT_QUEUE}-browser"
    )
    from toolhub.celery import app

    with celery_worker(env, app), daphne(env) as url:
        yield BrowserStack(url=url, env=env, data_dir=data_dir)


@pytest.fixture(scope="module", autouse=True)
def orm_beside_playwright():
    """Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still sequential.
    Set for the browser modules only (module-scoped, so around every database fixture of theirs): no other
    test, nor a subprocess one starts (`check --deploy`), inherits it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(autouse=True)
def stack_data(browser_stack, transactional_db):
    """Each test starts from the demo data, committed (the servers see it) and flushed after the test, once the
    servers have finished what the test started."""
    load_stack_data(browser_stack.data_dir)
    yield
    wait_until_the_servers_are_quiet()


# Sessions of the test database other than this one that are running a statement or hold a transaction open.
BUSY_SESSIONS = """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
AND pid <> pg_backend_pid() AND (state = 'active' OR state LIKE 'idle in transaction%')"""


def wait_until_the_servers_are_quiet(seconds: float = 15, quiet_polls: int = 3) -> None:
    """A turn's page shows it done while its worker may still write (its last event, the routing log, what it
    learned): the flush's TRUNCATE taking its tables one by one then deadlocked with that transaction. Wait for
    a few polls in a row with no other session of the test database busy (the flush reports what is left)."""
    from django.db import connection

    deadline, quiet = time.monotonic() + seconds, 0
    with connection.cursor() as cursor:
        while quiet < quiet_polls and time.monotonic() < deadline:
            cursor.execute(BUSY_SESSIONS)
            quiet = quiet + 1 if cursor.fetchone()[0] == 0 else 0
            time.sleep(0.05)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install -y chromium)", pytrace=False)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser, browser_stack):
    """Open another page in a fresh context (its own cookies): `new_page(NARROW)`; other options go to the context
    (`new_page(timezone_id="Asia/Ho_Chi_Minh")`).

    Every page of every browser test is watched for Content-Security-Policy violations (toolhub/csp.py): the
    test fails on any console message about one, so htmx, the vendored scripts and the templates stay within it.
    """
    contexts, violations = [], []

    def watch(message):
        if "Content Security Policy" in message.text:
            violations.append(f"{message.page.url if message.page else '?'}: {message.text}")

    def open_page(viewport=WIDE, **options):
        context = browser.new_context(viewport=viewport, base_url=browser_stack.url, **options)
        # The first turn of a fresh worker waits for the router's warm-up (the example index, its
        # diacritic-free copy included, embedded at start): over 20 s on a loaded host.
        context.set_default_timeout(TURN_ENDS_MS)
        context.on("console", watch)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()
    assert violations == [], "Content-Security-Policy violations:\n" + "\n".join(violations)


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture
def log_in(browser_stack):
    """Log `page` in as one of the role users through the login form."""

    def log_in_as(page, username: str) -> None:
        page.goto("/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(browser_stack.password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda url: "/login/" not in url)

    return log_in_as


@pytest.fixture
def ask_in_console(browser_stack):
    """Start a conversation from /console/ as the logged-in user (with `model`, a model profile's name): type, send,
    land on it with its socket open."""

    def ask(page, question: str, model: str = "") -> None:
        page.goto("/console/")
        page.get_by_label("Start a conversation").fill(question)
        if model:  # a model profile's name; the default profile otherwise
            page.get_by_label("Model").select_option(model)
        page.get_by_role("button", name="Send").click()
        page.wait_for_url("**/console/*/")
        page.wait_for_selector("body[data-live=open]")

    return ask


@pytest.fixture
def screenshot():
    """Save a full-page PNG under test-artifacts/screenshots/<name>.png and return its path."""

    def save(page, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
