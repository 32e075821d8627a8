"""A workflow conflict raised in any view is answered 409 (and the other workflow errors their status)."""

import pytest
from django.test import RequestFactory

from agents.turns.middleware import WorkflowErrorMiddleware
from agents.turns.workflows import WorkflowConflict, WorkflowExpired


def answer(path, exception):
    middleware = WorkflowErrorMiddleware(lambda request: None)
    return middleware.process_exception(RequestFactory().get(path), exception)


@pytest.mark.parametrize("path", ["/workflows/1/", "/v1/workflows/1"])
def test_a_stale_version_is_409(path):
    response = answer(path, WorkflowConflict("workflow 1 is at version 3, not 2: reload and retry"))
    assert response.status_code == 409
    assert "reload and retry" in response.content.decode()


def test_other_exceptions_pass_through():
    assert answer("/x/", ValueError("no")) is None


def test_expired_is_410():
    assert answer("/v1/x", WorkflowExpired("workflow 1 expired")).status_code == 410
