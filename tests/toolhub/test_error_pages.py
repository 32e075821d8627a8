"""The dashboard's 403, 404 and 500 pages are toolhub's own (the 500 page needs neither the database nor a
request), and /favicon.ico leads to the icon every page links."""

import pytest
from django.test import Client, RequestFactory
from django.views.defaults import server_error

from tests.support.builders import make_user


@pytest.mark.django_db
def test_an_unknown_page_is_toolhubs_404_in_the_layout(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "<title>Page not found · toolhub</title>" in page
    assert "/no-such-page/" in page and 'class="brand"' in page


def test_the_500_page_is_toolhubs_and_renders_without_the_database():
    # No django_db mark: any query here fails the test (pytest-django blocks database access).
    response = server_error(RequestFactory().get("/catalog/"))
    assert response.status_code == 500
    page = response.content.decode()
    assert "<title>Server error · toolhub</title>" in page and "Something went wrong" in page


@pytest.mark.django_db
def test_a_refused_write_is_toolhubs_403_with_the_reason(client):
    client.force_login(make_user("watcher", role="viewer"))
    response = client.post("/console/", {"message": "hello"})
    assert response.status_code == 403
    page = response.content.decode()
    assert "<title>Not allowed · toolhub</title>" in page
    assert "You may not start a conversation." in page and 'aria-label="Main"' in page


@pytest.mark.django_db
def test_a_form_without_its_csrf_token_is_toolhubs_403():
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("op", role="operator"))
    response = client.post("/console/", {"message": "hello"})
    assert response.status_code == 403
    page = response.content.decode()
    assert "<title>Form expired · toolhub</title>" in page and "nothing was changed" in page


@pytest.mark.django_db
def test_favicon_ico_redirects_to_the_icon_every_page_links(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    icon = client.get(response.url)
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)
    login_page = client.get("/login/").content.decode()
    assert f'<link rel="icon" href="{response.url}" type="image/svg+xml">' in login_page
