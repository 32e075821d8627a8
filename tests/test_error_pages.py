"""The dashboard's 404 and 500 pages are toolhub's own; the 500 page needs neither the database nor a request."""

import pytest
from django.test import RequestFactory
from django.views.defaults import server_error


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
