"""Shared test setup, and the conventions a test file follows so the suite stays fast and runs in parallel.

Stages (`make test`, docs/setup.md says what each proves):
- fast: `pytest -m "not integration"` on the embedded default (SQLite in memory,
  in-memory channel layer, eager Celery), split over two pytest-xdist workers;
- PostgreSQL: `pytest -m integration`: the integration tests (real PostgreSQL,
  Redis, Celery worker, Daphne, Chromium) and the unit tests marked `postgres`,
  whose point is what the database does (locking, constraints, compare-and-set,
  SQL functions). `postgres` implies `integration` (added below), so each test
  runs in exactly one stage; so does a folder of them (INTEGRATION_FOLDERS, which
  the fast stage does not even import). Integration tests fail loudly without the services.

Conventions (a new test file in the current style needs nothing else):
- Plain pytest functions; the database through `db` or `@pytest.mark.django_db`
  (each test in a transaction that is rolled back); `settings` to change
  settings; builders from tests/support/builders.py.
- `@pytest.mark.django_db(transaction=True)` only when other threads, processes
  or servers must see the rows: it empties every table after the test, migrated
  rows included (`restore_migrated_routing_data` puts the router's back).
- A test that starts from the demo catalog takes the `demo_catalog` fixture
  (a copy of the process's first load, tests/support/demo_snapshot.py) rather than
  calling `load_demo_catalog()`, which still works and costs about a second.
- Passwords hash with MD5 outside integration tests (`_fast_password_hashing`).
- Each worker's in-memory SQLite database is a copy of the last run's migrated one
  while no app file changed (tests/support/migrated_db.py); a test that needs a migrated
  database file of its own copies it too (`migrated_db.copy_to`).
- The embedding models load once per process (catalog.search.embeddings) and memoise
  what they embedded; behind the memo, one file of vectors (var/test-vectors.sqlite3,
  TOOLHUB_VECTOR_CACHE) serves both workers, the servers tests start, and later runs.
- The test MCP servers (`python -m demo.loyalty_mcp.server`, `python -m
  tests.support.generated_mcp_server`), the fresh Django processes of the settings
  and checks tests (`tests.toolhub.test_settings.run_python`) and the integration
  tests' Daphne, Celery workers and `manage.py` (tests/support/servers.py) start as
  forks of one warm interpreter per test process (tests/support/forkserver.py): same
  pipes, arguments, environment, exit codes, stop signals and kills, without
  each one importing the MCP SDK, Django and the rest again (~0.7-1.5 s of CPU
  a process).
- Any test may run in either worker, in any order: nothing shared between tests
  but the database's migrated rows; files under `tmp_path`, ports from
  `tests.support.servers.free_port`. Each worker has its own test database
  (pytest-django's `_gw0` suffix), Celery queue and channel-layer prefix (set
  here, inherited by the servers a test starts).
"""

import gc
import os
from pathlib import Path

import pytest
import pytest_asyncio
from django.conf import settings
from hypothesis import settings as hypothesis_settings

from tests.support import forkserver, migrated_db
from tests.support.builders import FAST_PASSWORD_HASHERS
from tests.support.scripted_openai import ScriptedOpenAI

# Tests assert behaviour, never time: no per-example deadline on a loaded CI machine.
hypothesis_settings.register_profile("toolhub", deadline=None)
hypothesis_settings.load_profile("toolhub")


def pytest_configure(config):
    _own_queue_and_channel_prefix_per_worker()
    _one_file_of_vectors_for_the_whole_run()
    migrated_db.install()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Each worker's test database starts with the role groups, so a test's `make_user` finds its group instead of
    making all three in its own transaction (~7 ms each time, for about every test that makes a user). A
    transactional test's flush empties them with every table and sends post_migrate, which makes them again."""
    from django.db.models.signals import post_migrate

    from toolhub.roles import APPS, ensure_groups

    last_app = max(APPS, key=settings.INSTALLED_APPS.index)  # its permissions are made after the other's

    def groups_again(sender, **kwargs):
        if sender.label == last_app:
            ensure_groups()

    with django_db_blocker.unblock():
        ensure_groups()
    post_migrate.connect(groups_again, weak=False, dispatch_uid="tests-role-groups")
    yield
    post_migrate.disconnect(dispatch_uid="tests-role-groups")


# What shapes WhiteNoise's list of static files (whitenoise.middleware reads these, and the finders the others).
_STATIC_LIST_SETTINGS = ("DEBUG", "INSTALLED_APPS", "STATICFILES_DIRS", "STATICFILES_FINDERS", "STATIC_URL",
                         "FORCE_SCRIPT_NAME", "WHITENOISE_AUTOREFRESH", "WHITENOISE_MAX_AGE",
                         "WHITENOISE_ALLOW_ALL_ORIGINS", "WHITENOISE_CHARSET", "WHITENOISE_MIMETYPES",
                         "WHITENOISE_ADD_HEADERS_FUNCTION", "WHITENOISE_INDEX_FILE", "WHITENOISE_IMMUTABLE_FILE_TEST",
                         "WHITENOISE_USE_FINDERS", "WHITENOISE_STATIC_PREFIX")  # fmt: skip


@pytest.fixture(scope="session", autouse=True)
def _static_files_listed_once():
    """Each test's `client` builds Django's middleware anew, and WhiteNoise's lists and stats every static file
    there (~180 with the admin's; 29 ms under cProfile, an eighth of the page tests' time). A process lists them once
    for each state of the settings that shape the list, and every later middleware gets the same entries."""
    from whitenoise.middleware import WhiteNoiseMiddleware

    original = WhiteNoiseMiddleware.add_files_from_finders
    listed: dict[str, dict] = {}

    def add_files_from_finders(self):
        key = repr([getattr(settings, name, None) for name in _STATIC_LIST_SETTINGS])
        if key not in listed:
            before = dict(self.files)
            original(self)
            listed[key] = {url: entry for url, entry in self.files.items() if before.get(url) is not entry}
        self.files.update(listed[key])

    WhiteNoiseMiddleware.add_files_from_finders = add_files_from_finders
    yield
    WhiteNoiseMiddleware.add_files_from_finders = original


@pytest.fixture(scope="session", autouse=True)
def _test_servers_fork():
    """Where tests run (not in pytest-xdist's controller, which would import the MCP SDK for nothing first)."""
    forkserver.install()


def pytest_unconfigure(config):
    """The interpreter's last garbage collection, at exit, walks every object a test process made (models,
    indexes, caches): ~1 s for each worker, which the controller waits for, then for itself. Nothing left needs
    collecting, so the objects of the run are frozen out of it."""
    gc.freeze()


def _one_file_of_vectors_for_the_whole_run() -> None:
    """Both workers, every server and worker a test starts, and the next run share the vectors the models made
    (catalog/search/embedding_cache.py): the demo's examples are embedded once per machine, not once per process."""
    if "TOOLHUB_VECTOR_CACHE" not in os.environ:
        os.environ["TOOLHUB_VECTOR_CACHE"] = str(settings.BASE_DIR / "var" / "test-vectors.sqlite3")
    settings.TOOLHUB_VECTOR_CACHE = os.environ["TOOLHUB_VECTOR_CACHE"]


def _own_queue_and_channel_prefix_per_worker() -> None:
    """Two xdist workers share Redis: a worker's Celery worker must never take the other's tasks
    (they run on another test database), nor its browsers hear the other's channel-layer groups."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from toolhub.celery import app

    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-{worker}"
    os.environ["TOOLHUB_CELERY_QUEUE"] = settings.CELERY_TASK_DEFAULT_QUEUE = queue
    app.conf.task_default_queue = queue
    layer_config = settings.CHANNEL_LAYERS["default"].get("CONFIG")
    if layer_config is not None:
        os.environ["TOOLHUB_CHANNEL_PREFIX"] = layer_config["prefix"] = f"{layer_config['prefix']}-{worker}"


# Folders whose every test is an integration test (marked below, whatever their files say): the fast stage,
# `-m "not integration"`, does not import them (~1 s of each worker's collection: Playwright, the OpenAI SDK).
INTEGRATION_FOLDERS = ("integration", "browser")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("markexpr") == "not integration" and collection_path.parent == Path(__file__).parent:
        return collection_path.name in INTEGRATION_FOLDERS or None
    return None


def pytest_collection_modifyitems(items):
    folders = [Path(__file__).parent / name for name in INTEGRATION_FOLDERS]
    for item in items:
        if item.get_closest_marker("integration") is not None:
            continue
        if item.get_closest_marker("postgres") is not None or any(item.path.is_relative_to(f) for f in folders):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _integration_needs_real_services(request):
    if request.node.get_closest_marker("integration") is None:
        return
    missing = []
    if not settings.DATABASE_URL.startswith(("postgres://", "postgresql://")):
        missing.append("DATABASE_URL=postgres://...")
    if not settings.REDIS_URL:
        missing.append("REDIS_URL=redis://...")
    if missing:
        pytest.fail(
            "integration test needs the real services: set " + " and ".join(missing) + " (make test does this)",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _fast_password_hashing(request, settings):
    """In-process tests hash passwords cheaply; integration tests keep the real hashers (their servers,
    other processes with the deployment's settings, check the passwords the test stored)."""
    if request.node.get_closest_marker("integration") is None:
        settings.PASSWORD_HASHERS = FAST_PASSWORD_HASHERS


@pytest.fixture(autouse=True)
def _fresh_rate_limit_counts():
    """Rate limit counts (toolhub/rate_limits.py) start at zero in each test: ids repeat across rolled-back tests.
    Only the in-process cache is cleared; clearing Redis would empty the channel layer's and the broker's db too."""
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    if isinstance(caches["default"], LocMemCache):
        caches["default"].clear()


def pytest_report_header(config):
    database = settings.DATABASES["default"]
    where = f"{database.get('HOST') or 'local'}:{database.get('PORT') or '-'}" if database.get("HOST") else "file"
    return [
        f"toolhub database: {database['ENGINE'].rsplit('.', 1)[-1]} ({where})",
        f"toolhub channel layer: {settings.CHANNEL_LAYERS['default']['BACKEND']}",
        f"toolhub celery broker: {settings.CELERY_BROKER_URL} (eager={settings.CELERY_TASK_ALWAYS_EAGER})",
    ]


@pytest.fixture
def demo_catalog(db):
    """The demo catalog in this test's database, as `load_demo_catalog()` writes it (its summary is the value).

    Copied from this process's first load (tests/support/demo_snapshot.py says when it loads for real instead).
    """
    from tests.support.demo_snapshot import demo_catalog as load

    return load()


@pytest_asyncio.fixture
async def mcp_endpoint():
    """toolhub's /mcp ASGI endpoint in this test's process; its session runner stopped and connections closed after."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from agents.mcp_gateway.server import McpEndpoint

    endpoint = McpEndpoint()
    yield endpoint
    if endpoint._runner is not None:
        endpoint._runner.cancel()
    await sync_to_async(connections.close_all)()


@pytest.fixture
def eager_celery():
    """Run tasks in the test's own process, whatever broker the run is configured with."""
    from toolhub.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = previous


@pytest.fixture
def counted_embedder(monkeypatch):
    """Replace the dense model with the fast bag-of-words stand-in and record the texts it embeds."""
    from agents.router import nearest_examples as examples
    from catalog.search import embeddings
    from catalog.search import service as catalog_search
    from tests.catalog.search.test_search import bag_of_words_embedder

    calls = []

    def embed(texts, *, model=None):
        calls.append(list(texts))
        return bag_of_words_embedder(texts)

    embed.computes = bag_of_words_embedder  # what it returns, for tests/support/demo_snapshot's key
    monkeypatch.setattr(embeddings, "embed_texts", embed)
    # Vectors are stored under their model's name: the stand-in is another model, so none the real models stored
    # (a demo catalog's tools and examples) is compared with the stand-in's.
    stand_in = {key: f"{name} (bag-of-words stand-in)" for key, name in embeddings.MODEL_NAMES.items()}
    monkeypatch.setattr(embeddings, "MODEL_NAMES", stand_in)
    # The routing example index is cached by catalog state, which a demo_catalog copy shares with other tests:
    # this test builds its own, and the one before it comes back after (its vectors are the real model's).
    monkeypatch.setattr(examples, "_current", None)
    catalog_search.reset_catalog_index()
    yield calls
    catalog_search.reset_catalog_index()


@pytest.fixture
def scripted_model(settings):
    """An OpenAI-compatible server on loopback that answers with the steps a test scripts."""
    with ScriptedOpenAI() as server:
        settings.TOOLHUB_MODEL_PROVIDER = "openai"
        settings.TOOLHUB_MODEL_BASE_URL = server.base_url
        settings.TOOLHUB_MODEL = "scripted-model"
        settings.TOOLHUB_MODEL_RETRIES = 0
        yield server
