"""An OAuth MCP client end to end: the official SDK's OAuthClientProvider against toolhub's /mcp on a real Daphne.

The client finds the authorization server from the 401, registers itself, and
opens the authorization URL; the "browser" here is an HTTP client that logs in
on toolhub's login page and allows on the consent page, as the test user would,
then hands the client the code from the redirect. The client exchanges it and
lists and calls tools with the access token, then refreshes it.
"""

import asyncio
import html
import json
import re
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import pytest
from mcp import ClientSession, MCPError
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken

from demo.catalog import load_demo_catalog
from tests.support.builders import make_user
from tests.support.servers import daphne, database_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"
REDIRECT = "http://127.0.0.1:33418/callback"  # never listened on: the "browser" reads the redirect instead


class MemoryStorage:
    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def hidden_fields(page: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in
            re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)}  # fmt: skip


class Browser:
    """What the user does in a browser: log in on toolhub's page, allow on the consent page; keeps the redirect."""

    def __init__(self, username: str):
        self.username = username
        self.visits: list[str] = []
        self.redirect: asyncio.Future | None = None

    async def open(self, authorization_url: str) -> None:
        self.visits.append(authorization_url)
        self.redirect = asyncio.get_running_loop().create_future()
        async with httpx2.AsyncClient(timeout=60) as browser:
            response = await browser.get(authorization_url)
            if response.status_code == 302:  # signed out: toolhub's login page, then back to the authorization URL
                login_url = urljoin(authorization_url, response.headers["location"])
                assert urlsplit(login_url).path == "/login/"
                login_page = await browser.get(login_url)
                form = hidden_fields(login_page.text) | {"username": self.username, "password": PASSWORD}
                logged_in = await browser.post(login_url, data=form)
                assert logged_in.status_code == 302, logged_in.text
                response = await browser.get(urljoin(authorization_url, logged_in.headers["location"]))
            assert response.status_code == 200 and "to toolhub?" in response.text, response.text
            answer = await browser.post(authorization_url, data=hidden_fields(response.text) | {"allow": "on"})
            assert answer.status_code == 302, answer.text
            self.redirect.set_result(answer.headers["location"])

    async def callback(self) -> AuthorizationCodeResult:
        location = await self.redirect
        assert location.startswith(REDIRECT)
        params = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))


def oauth_client(base: str, browser: Browser, storage: MemoryStorage) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(client_name="itest agent", redirect_uris=[REDIRECT],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none")  # fmt: skip
    return OAuthClientProvider(server_url=f"{base}/mcp", client_metadata=metadata, storage=storage,
                               redirect_handler=browser.open, callback_handler=browser.callback)  # fmt: skip


async def tool_names_and_a_call(base: str, provider: OAuthClientProvider) -> tuple[list[str], dict]:
    """The tools listed, and what calling `calculate` gave: its result, or the error that refused it."""
    async with httpx2.AsyncClient(auth=provider, timeout=120) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = [tool.name for tool in (await session.list_tools()).tools]
                try:
                    called = await asyncio.wait_for(session.call_tool("calculate", {"expression": "6 * 7"}), 60)
                except MCPError as refused:
                    return names, {"refused": str(refused)}
                return names, {"is_error": called.is_error, "text": called.content[0].text}


def test_the_sdks_oauth_client_signs_in_through_toolhub_and_uses_mcp():
    load_demo_catalog()
    make_user("ops", role="operator")
    browser, storage = Browser("ops"), MemoryStorage()
    with daphne(database_env()) as base:
        provider = oauth_client(base, browser, storage)

        names, called = asyncio.run(tool_names_and_a_call(base, provider))

        assert {"tool_search", "calculate"} <= set(names)
        assert not called["is_error"] and json.loads(called["text"])["result"] == 42
        assert len(browser.visits) == 1
        visit = parse_qs(urlsplit(browser.visits[0]).query)
        assert visit["code_challenge_method"] == ["S256"] and visit["resource"] == [f"{base}/mcp"]
        assert visit["scope"] == ["mcp"]  # what the 401's challenge asked for
        assert storage.client_info.token_endpoint_auth_method == "none"
        first_token = storage.tokens.access_token

        # Past its expiry the client refreshes the token: no second visit to the browser.
        provider.context.token_expiry_time = 1.0  # 1970: long past (0 would mean "no expiry")
        names, _ = asyncio.run(tool_names_and_a_call(base, provider))

        assert "calculate" in names and len(browser.visits) == 1
        assert storage.tokens.access_token != first_token
        assert AccessToken.objects.get().resource == [f"{base}/mcp"]


def test_a_viewer_connects_with_oauth_and_lists_tools_but_cannot_call_one():
    load_demo_catalog()
    make_user("reader", role="viewer")
    browser = Browser("reader")
    with daphne(database_env()) as base:
        names, called = asyncio.run(tool_names_and_a_call(base, oauth_client(base, browser, MemoryStorage())))

    assert "calculate" in names and len(browser.visits) == 1
    assert "may not call a tool" in called["refused"]
