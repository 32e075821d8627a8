"""Every /v1 answer is OpenAI-style JSON: unknown paths, wrong methods, unhandled exceptions, debug or not."""

import re

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver

from agents.access.api_keys import create_api_key
from agents.openai_api import views as api
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


def error_of(response, status: int) -> dict:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def api_paths(patterns=None, prefix="") -> list[str]:
    """Every /v1 route of the URL resolver, a number for each parameter (a new route is covered unasked)."""
    paths = []
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            paths += api_paths(pattern.url_patterns, route)
        elif route.startswith("v1/"):
            paths.append("/" + re.sub(r"<int:\w+>", "1", route))
    return paths


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/v1/nope", "/v1/chat/completion", "/v1/", "/v1/models/extra/path"])
def test_an_unknown_api_path_is_a_json_404(client, settings, path, debug):
    settings.DEBUG = debug
    error = error_of(client.get(path), 404)
    assert error["code"] == "not_found" and path in error["message"]


def test_every_api_route_answers_a_wrong_method_with_a_json_405(client):
    assert len(api_paths()) >= 3
    for path in api_paths():
        error_of(client.delete(path), 405)


@pytest.mark.parametrize("debug", [False, True])
def test_an_unhandled_exception_is_a_json_500_without_a_traceback(settings, monkeypatch, debug):
    settings.DEBUG = debug

    def broken():
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api, "model_objects", broken)
    key = create_api_key(user=make_user(), name="test")[1]
    response = Client(raise_request_exception=False).get("/v1/models", headers={"Authorization": f"Bearer {key}"})
    error = error_of(response, 500)
    assert error["type"] == "server_error"
    assert "secret internals" not in response.content.decode() and "Traceback" not in response.content.decode()


def test_dashboard_errors_stay_html(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
