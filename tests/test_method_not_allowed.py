"""Every 405 toolhub answers names the methods the resource takes in Allow (RFC 9110 §15.5.6): the dashboard's
decorated and class-based views, OAuth, /v1 (its JSON errors) and /mcp. Generated from the URL resolver through
the permission matrix's routes, so a new endpoint is covered unasked."""

import pytest
from django.contrib.auth import get_user_model

from agents.access.api_keys import create_api_key
from tests.support.mcp_asgi import asgi_call
from tests.test_permission_matrix import RULES

WRONG_METHODS = ("PUT", "PATCH", "DELETE")


def concrete(url: str) -> str:
    """The matrix's URL with every object it names as id 1: a method is refused before the object is looked up."""
    names = ("example", "conversation", "log", "workflow", "approval", "turn", "policy_change", "question")
    return url.format_map(dict.fromkeys(names, 1))


def refused_methods(route: str) -> tuple[str, ...]:
    """The methods to try on `route`: never accepted anywhere, and GET or POST where the matrix says 405."""
    methods = RULES[route][1]
    return WRONG_METHODS + tuple(m for m in ("GET", "POST") if methods[m]["superuser"] == 405)


@pytest.mark.django_db
def test_every_405_names_the_allowed_methods(client):
    root = get_user_model().objects.create_superuser("root", password="a-long-test-password")
    client.force_login(root)
    key = create_api_key(user=root, name="allow")[1]
    refused = []
    for route, (url, _rules) in RULES.items():
        for method in refused_methods(route):
            response = client.generic(method, concrete(url), headers={"Authorization": f"Bearer {key}"})
            if response.status_code != 405:
                continue
            refused.append((method, route))
            allowed = [name.strip() for name in response.get("Allow", "").split(",") if name.strip()]
            assert allowed and method not in allowed, f"{method} /{route}: Allow {response.get('Allow')!r}"
    assert {route for _method, route in refused} >= {"v1/models", "v1/chat/completions", "oauth/token/", "catalog/"}


@pytest.mark.django_db
@pytest.mark.parametrize("path,allowed", [("/v1/models", "GET, HEAD"), ("/v1/chat/completions", "POST"),
                                          ("/v1/openapi.json", "GET, HEAD"), ("/v1/approvals/1", "POST"),
                                          ("/v1/models/toolhub", "GET, HEAD")])  # fmt: skip
def test_a_v1_405_is_an_openai_error_with_allow(client, path, allowed):
    response = client.delete(path)

    assert response.status_code == 405 and response["Allow"] == allowed
    assert response.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_405_from_mcp_names_the_allowed_methods(mcp_endpoint):
    from asgiref.sync import sync_to_async

    from tests.support.builders import make_user

    user = await sync_to_async(make_user)("ops", role="operator")
    key = (await sync_to_async(create_api_key)(user=user, name="mcp"))[1]
    headers = {"host": "localhost", "authorization": f"Bearer {key}", "accept": "application/json, text/event-stream"}

    reply = await asgi_call(mcp_endpoint, "PUT", "/mcp", headers)

    assert reply.status == 405 and "PUT" not in reply.headers["allow"] and "POST" in reply.headers["allow"]
