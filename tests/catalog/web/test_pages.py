"""Pages need a login; the catalog lists tools with their policy state, the fail-closed ones first."""

import pytest

from tests.support.builders import make_policy, make_tool, make_user

PAGES = ["/", "/catalog/"]


@pytest.mark.django_db
@pytest.mark.parametrize("url", PAGES)
def test_anonymous_requests_redirect_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response.url == f"/login/?next={url}"


@pytest.mark.django_db
def test_login_page_renders_and_logs_in(client):
    make_user("ops", password="a-long-test-password")
    assert client.get("/login/").status_code == 200
    response = client.post("/login/", {"username": "ops", "password": "a-long-test-password"})
    assert response.status_code == 302 and response.url == "/"
    assert client.get("/").status_code == 200


@pytest.mark.django_db
def test_wrong_password_shows_an_error(client):
    make_user("ops")
    response = client.post("/login/", {"username": "ops", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


@pytest.mark.django_db
def test_catalog_lists_tools_and_puts_unpolicied_ones_in_needs_policy(client):
    make_policy(make_tool("get_weather"))
    make_tool("rogue_tool")
    client.force_login(make_user())
    page = client.get("/catalog/").content.decode()
    assert "get_weather" in page and "rogue_tool" in page
    needs_policy = page.split('id="needs-policy"')[1].split("</section>")[0]
    assert "rogue_tool" in needs_policy and "get_weather" not in needs_policy


@pytest.mark.django_db
def test_catalog_filters_and_htmx_fragment(client):
    make_policy(make_tool("get_weather"))
    make_tool("rogue_tool")
    client.force_login(make_user())
    page = client.get("/catalog/", {"policy": "none"}).content.decode()
    table = page.split('id="tool-table"')[1]
    assert "rogue_tool" in table and "get_weather" not in table
    fragment = client.get("/catalog/", {"q": "weather"}, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="tool-table"')
    assert "get_weather" in fragment and "rogue_tool" not in fragment and "<html" not in fragment


@pytest.mark.django_db
def test_tool_detail_shows_the_definition_sent_to_the_model(client):
    make_tool("rogue_tool")
    client.force_login(make_user())
    page = client.get("/catalog/rogue_tool/").content.decode()
    assert "denied everywhere until a policy is approved" in page
    assert "&quot;parameters&quot;" in page
    assert client.get("/catalog/missing/").status_code == 404


@pytest.mark.django_db
def test_catalog_flags_tools_over_the_schema_token_cap(client, settings):
    big = make_policy(make_tool("big_tool")).tool
    make_policy(make_tool("small_tool", description="Small."))
    settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS = big.schema_tokens - 1
    client.force_login(make_user())
    page = client.get("/catalog/").content.decode()
    notice = page.split('aria-label="Schema token gate"')[1].split("</section>")[0]
    assert "big_tool" in notice and "small_tool" not in notice
    assert "over the" in client.get("/catalog/big_tool/").content.decode()
