"""Connections are bounded per process (psycopg pool on PostgreSQL); no connection in time is 503 + Retry-After."""

import pytest
from django.db import OperationalError
from django.test import Client
from psycopg_pool import PoolTimeout

from agents.access.api_keys import create_api_key
from agents.openai_api import views as api
from tests.builders import make_user
from tests.test_settings import run_python

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


def test_other_database_errors_are_not_called_busy(monkeypatch):
    response = get_models_failing_with(monkeypatch, OperationalError("relation does not exist"))
    assert response.status_code == 500 and "Retry-After" not in response


def test_postgresql_gets_a_bounded_pool_from_the_environment(tmp_path):
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        "d = settings.DATABASES['default']; print(json.dumps([d['CONN_MAX_AGE'], d['OPTIONS'].get('pool')]))"
    )
    result = run_python(code, tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/x",
                        TOOLHUB_DB_POOL_MAX="2", TOOLHUB_DB_POOL_TIMEOUT="0.5")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '[0, {"min_size": 1, "max_size": 2, "timeout": 0.5}]'
