"""The examples section of the tool page: everyone logged in reads it; operators add, edit, approve, delete."""

import pytest

from catalog.models import ToolExample
from catalog.search.tool_examples import add_example
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("counted_embedder")]


@pytest.fixture
def tool():
    tool = make_tool("get_weather", description="Weather forecast for a city.")
    make_policy(tool)
    return tool


def test_viewers_see_examples_but_no_controls(client, tool):
    add_example(tool=tool, text="is it raining in oslo", source="learned")
    client.force_login(make_user("viewer1", role="viewer"))
    page = client.get("/catalog/get_weather/").content.decode()
    assert "is it raining in oslo" in page and "pending" in page
    assert "Add an example" not in page


@pytest.mark.parametrize(
    "url",
    ["/catalog/get_weather/examples/", "/catalog/get_weather/examples/1/", "/catalog/get_weather/examples/1/delete/"],
)
def test_changing_examples_needs_the_permission(client, tool, url):
    add_example(tool=tool, text="is it raining in oslo")
    client.force_login(make_user("viewer1", role="viewer"))
    assert client.post(url, {"text": "new text", "approved": "on"}).status_code == 403
    assert list(ToolExample.objects.values_list("text", flat=True)) == ["is it raining in oslo"]


def test_anonymous_posts_redirect_to_login(client, tool):
    response = client.post("/catalog/get_weather/examples/", {"text": "hello"})
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert ToolExample.objects.count() == 0


def test_an_operator_adds_an_approved_example(client, tool):
    client.force_login(make_user())
    response = client.post("/catalog/get_weather/examples/", {"text": "will it snow in oslo", "approved": "on"})
    assert response.status_code == 302
    example = ToolExample.objects.get()
    assert (example.text, example.source, example.approved) == ("will it snow in oslo", "operator", True)


def test_htmx_add_returns_the_section_with_the_new_example(client, tool):
    client.force_login(make_user())
    response = client.post(
        "/catalog/get_weather/examples/", {"text": "will it snow in oslo", "approved": "on"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<section id="tool-examples"')
    assert "will it snow in oslo" in body and "<html" not in body


@pytest.mark.parametrize("text, message", [("", "This field is required"), ("x" * 1001, "at most 1000 characters")])
def test_bad_text_shows_the_error_next_to_the_field(client, tool, text, message):
    client.force_login(make_user())
    response = client.post("/catalog/get_weather/examples/", {"text": text}, HTTP_HX_REQUEST="true")
    assert message in response.content.decode()
    assert ToolExample.objects.count() == 0


def test_an_example_for_a_disabled_tool_is_refused_with_the_reason(client, tool):
    tool.enabled = False
    tool.save()
    client.force_login(make_user())
    response = client.post("/catalog/get_weather/examples/", {"text": "rain in oslo"})
    assert response.status_code == 400 and "get_weather is disabled" in response.content.decode()
    assert ToolExample.objects.count() == 0


def test_an_operator_approves_edits_and_deletes(client, tool):
    example = add_example(tool=tool, text="is it raining in oslo", source="learned").example
    client.force_login(make_user())
    client.post(f"/catalog/get_weather/examples/{example.pk}/", {"approved": "on"})
    example.refresh_from_db()
    assert example.approved and example.text == "is it raining in oslo"
    client.post(f"/catalog/get_weather/examples/{example.pk}/", {"text": "is it raining in bergen"})
    example.refresh_from_db()
    assert example.text == "is it raining in bergen" and not example.approved
    client.post(f"/catalog/get_weather/examples/{example.pk}/delete/")
    assert ToolExample.objects.count() == 0


def test_an_example_of_another_tool_is_not_found_under_this_one(client, tool):
    other = make_tool("send_email")
    example = add_example(tool=other, text="mail my boss").example
    client.force_login(make_user())
    assert client.post(f"/catalog/get_weather/examples/{example.pk}/delete/").status_code == 404
    assert ToolExample.objects.count() == 1
