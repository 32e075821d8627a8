"""Shared test setup: integration tests fail loudly (never skip) without the real services."""

import pytest
from django.conf import settings
from hypothesis import settings as hypothesis_settings

from tests.scripted_openai import ScriptedOpenAI

# Tests assert behaviour, never time: no per-example deadline on a loaded CI machine.
hypothesis_settings.register_profile("toolhub", deadline=None)
hypothesis_settings.load_profile("toolhub")


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

    Copied from this process's first load (tests/demo_snapshot.py says when it loads for real instead).
    """
    from tests.demo_snapshot import demo_catalog as load

    return load()


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
    from catalog import embeddings
    from catalog import search as catalog_search
    from tests.test_search import bag_of_words_embedder

    calls = []

    def embed(texts, *, model=None):
        calls.append(list(texts))
        return bag_of_words_embedder(texts)

    monkeypatch.setattr(embeddings, "embed_texts", embed)
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
