"""Connections are bounded per process (psycopg pool on PostgreSQL); no connection in time is 503 + Retry-After."""

import json

import pytest
from django.db import InterfaceError, OperationalError
from django.test import Client
from psycopg_pool import PoolTimeout

from agents.access.api_keys import create_api_key
from agents.openai_api import views as api
from tests.support.builders import make_user
from tests.toolhub.test_settings import run_python

pytestmark = pytest.mark.django_db


def get_models_failing_with(monkeypatch, exception):
    def busy():
        raise exception

    monkeypatch.setattr(api, "model_objects", busy)
    key = create_api_key(user=make_user(), name="test")[1]
    return Client(raise_request_exception=False).get("/v1/models", headers={"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize(
    "exception",
    [
        PoolTimeout("couldn't get a connection after 10.00 sec"),
        OperationalError("FATAL: sorry, too many clients already"),
    ],
)
def test_no_connection_in_time_is_503_with_retry_after_in_openai_style(monkeypatch, exception):
    response = get_models_failing_with(monkeypatch, exception)
    assert response.status_code == 503 and response["Retry-After"] == "2"
    error = response.json()["error"]
    assert error["code"] == "service_unavailable" and "connection limit" in error["message"]


@pytest.mark.parametrize(
    "exception",
    [
        OperationalError(
            'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused'
        ),
        OperationalError("terminating connection due to administrator command"),
        OperationalError("consuming input failed: server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
    ],
)
def test_a_database_that_is_down_or_restarting_is_503_with_retry_after_on_the_api_and_the_pages(monkeypatch, exception):
    response = get_models_failing_with(monkeypatch, exception)
    assert response.status_code == 503 and response["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "service_unavailable"
    assert "database is unavailable" in response.json()["error"]["message"]
    monkeypatch.setattr(
        "django.contrib.auth.views.LoginView.get", lambda *args, **kwargs: (_ for _ in ()).throw(exception)
    )
    page = Client(raise_request_exception=False).get("/login/")
    assert page.status_code == 503 and page["Retry-After"] == "2" and b"database is unavailable" in page.content


def test_other_database_errors_are_not_called_busy(monkeypatch):
    response = get_models_failing_with(monkeypatch, OperationalError("relation does not exist"))
    assert response.status_code == 500 and "Retry-After" not in response


def test_postgresql_gets_a_bounded_pool_from_the_environment(tmp_path):
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        "d = settings.DATABASES['default']; "
        "print(json.dumps([d['CONN_MAX_AGE'], d['OPTIONS'].get('pool'), d['CONN_HEALTH_CHECKS']]))"
    )
    result = run_python(code, tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/x",
                        TOOLHUB_DB_POOL_MAX="2", TOOLHUB_DB_POOL_TIMEOUT="0.5")  # fmt: skip
    assert result.returncode == 0, result.stderr
    conn_max_age, pool, checked = json.loads(result.stdout)
    assert conn_max_age == 0 and pool == {"min_size": 1, "max_size": 2, "timeout": 0.5} and checked is True
