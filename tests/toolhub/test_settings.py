"""One settings module: the embedded default with nothing set, the scaled path by environment alone."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from tests.support import forkserver

ROOT = Path(__file__).resolve().parents[2]
SCALED_ENV_VARS = (
    "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "TOOLHUB_MODEL_BASE_URL", "SECRET_KEY", "DEBUG", "TOOLHUB_DEBUG",
)  # fmt: skip
PROBE = """
import json, django
from django.conf import settings
django.setup()
print(json.dumps({
    "engine": settings.DATABASES["default"]["ENGINE"],
    "db_name": str(settings.DATABASES["default"]["NAME"]),
    "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "broker": settings.CELERY_BROKER_URL,
    "provider": settings.TOOLHUB_MODEL_PROVIDER,
    "model": settings.TOOLHUB_MODEL,
    "secret_key": settings.SECRET_KEY,
    "beat": sorted(settings.CELERY_BEAT_SCHEDULE),
    "debug": settings.DEBUG,
    "ssl_redirect": settings.SECURE_SSL_REDIRECT,
    "allowed_hosts": settings.ALLOWED_HOSTS,
}))
"""


def run_python(code_or_args, tmp_path, **env_overrides):
    """`python -c CODE` or `python ARGS...` in a process of its own, its settings read from its own environment
    (as a fork of a warm interpreter that never read Django's settings: tests/support/forkserver.py)."""
    env = {k: v for k, v in os.environ.items() if k not in SCALED_ENV_VARS}
    env |= {"DJANGO_SETTINGS_MODULE": "toolhub.settings", "TOOLHUB_DATA_DIR": str(tmp_path)} | env_overrides
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run(forkserver.command(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def probe(tmp_path, **env):
    result = run_python(PROBE, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_nothing_set_is_the_embedded_default(tmp_path):
    config = probe(tmp_path)
    assert config["engine"] == "django.db.backends.sqlite3"
    assert config["db_name"] == str(tmp_path / "toolhub.sqlite3")
    assert config["layer"] == "channels.layers.InMemoryChannelLayer"
    assert config["eager"] is True
    assert config["provider"] == "builtin"
    assert config["beat"] == [
        "apply-retention",
        "cleanup-expired-workflows",
        "clear-expired-oauth-tokens",
        "close-overview-hours",
        "watch-turns",
    ]


def test_embedded_secret_key_is_generated_once_and_kept(tmp_path):
    first = probe(tmp_path)["secret_key"]
    assert len(first) >= 50
    assert (tmp_path / "secret_key").read_text() == first
    assert probe(tmp_path)["secret_key"] == first


def test_the_embedded_database_writes_ahead_so_pages_read_while_a_turn_commits(tmp_path):
    code = (
        "import django; django.setup(); from django.db import connection; cursor = connection.cursor(); "
        "print(cursor.execute('PRAGMA journal_mode').fetchone()[0], cursor.execute('PRAGMA synchronous').fetchone()[0])"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["wal", "1"]  # synchronous 1 = NORMAL


def test_environment_selects_the_scaled_path(tmp_path):
    config = probe(
        tmp_path,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        REDIS_URL="redis://127.0.0.1:6379/3",
        TOOLHUB_MODEL_BASE_URL="http://127.0.0.1:9999/v1",
        TOOLHUB_MODEL="qwen2.5-7b-instruct",
    )
    assert config["engine"] == "django.db.backends.postgresql"
    assert config["layer"] == "channels_redis.core.RedisChannelLayer"
    assert config["eager"] is False
    assert config["broker"] == "redis://127.0.0.1:6379/3"
    assert (config["provider"], config["model"]) == ("openai", "qwen2.5-7b-instruct")


def test_debug_is_off_unless_explicitly_set(tmp_path):
    unset = probe(tmp_path)
    assert unset["debug"] is False
    # Unset is not a deployment: loopback hosts, plain HTTP, a generated key (the embedded default, the tests).
    assert unset["ssl_redirect"] is False and "127.0.0.1" in unset["allowed_hosts"]
    assert probe(tmp_path, DEBUG="1")["debug"] is True
    assert probe(tmp_path, TOOLHUB_DEBUG="1")["debug"] is True
    assert probe(tmp_path, TOOLHUB_DEBUG="0", DEBUG="1", SECRET_KEY="k" * 50)["debug"] is False


def test_make_run_sets_debug_for_the_embedded_default_and_says_so():
    env = {k: v for k, v in os.environ.items() if k not in SCALED_ENV_VARS}
    result = subprocess.run(["make", "-n", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "make run: DEBUG=1 for the embedded default" in result.stdout
    assert "DEBUG=1 .venv/bin/daphne" in result.stdout
    assert "DEBUG=1 .venv/bin/python manage.py setup_demo" in result.stdout


def test_debug_0_make_run_is_the_embedded_default_without_debug_pages_and_keeps_a_generated_key(tmp_path):
    """DEBUG=0 set in settings' environment means a deployment (no key: refuses to start); make run unsets it for its
    processes, so they read the local defaults without debug pages and the key generated once under the data dir."""
    env = {k: v for k, v in os.environ.items() if k not in SCALED_ENV_VARS} | {"DEBUG": "0"}
    result = subprocess.run(["make", "-n", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "env -u DEBUG -u TOOLHUB_DEBUG .venv/bin/python manage.py setup_demo" in result.stdout
    assert "env -u DEBUG -u TOOLHUB_DEBUG .venv/bin/daphne" in result.stdout
    config = probe(tmp_path)  # what those processes read: DEBUG and SECRET_KEY unset
    assert config["debug"] is False and config["ssl_redirect"] is False
    assert (tmp_path / "secret_key").read_text() == config["secret_key"]


def test_secret_key_is_required_when_debug_is_off(tmp_path):
    result = run_python(PROBE, tmp_path, DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off." in result.stderr


def test_a_malformed_boolean_is_a_clear_error(tmp_path):
    result = run_python(PROBE, tmp_path, DEBUG="maybe")
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = run_python(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        tmp_path,
        DEBUG="0",
        SECRET_KEY="x" * 20 + "-production-secret-key-for-the-deploy-check-0123456789",
        ALLOWED_HOSTS="toolhub.example.com",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # One check silenced, for a reason settings.py gives: loopback http redirect URIs for native OAuth clients.
    assert "System check identified no issues (1 silenced)." in result.stdout
    assert settings.SILENCED_SYSTEM_CHECKS == ["oauth2_provider.W008"]


def test_migrations_are_complete(tmp_path):
    result = run_python(["manage.py", "makemigrations", "--check", "--dry-run"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes detected" in result.stdout


@pytest.mark.parametrize("name", ["TOOLHUB_STEWARD"])
def test_unknown_steward_mode_is_refused(tmp_path, name):
    result = run_python(PROBE, tmp_path, **{name: "magic"})
    assert "TOOLHUB_STEWARD='magic': use rules, llm or hybrid." in result.stderr
