"""Logging in and out in a real browser; every dashboard page sends an anonymous visitor to the login."""

import pytest

from toolhub.context_processors import NAVIGATION


def test_anonymous_visitor_is_sent_to_the_login_from_the_overview(page):
    page.goto("/")
    assert "/login/" in page.url
    assert page.get_by_role("heading", name="Log in to toolhub").is_visible()


def test_wrong_password_shows_an_error_and_stays_on_the_login(page):
    page.goto("/login/")
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    assert page.get_by_role("alert").is_visible()
    assert "/login/" in page.url


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_each_role_logs_in_sees_the_navigation_and_logs_out(page, log_in, role):
    log_in(page, role)
    navigation = page.get_by_role("navigation", name="Main")
    assert [link.inner_text() for link in navigation.get_by_role("link").all()] == [label for label, _ in NAVIGATION]
    assert page.get_by_text(role, exact=True).is_visible()
    page.get_by_role("button", name="Log out").click()
    page.goto("/")
    assert "/login/" in page.url
