"""The menu marks the section a page belongs to, and none on a page of no section."""

import pytest

from toolhub.context_processors import navigation


@pytest.mark.parametrize(
    "path,current",
    [
        ("/", "Overview"),
        ("/console/", "Console"),
        ("/console/12/", "Console"),
        ("/policies/-/review/", "Policies"),
        ("/account/", None),
        ("/no-such-page/", None),
    ],
)
def test_the_current_section_is_the_longest_prefix_and_the_overview_only_itself(path, current):
    marked = [item["label"] for item in navigation(path) if item["current"]]
    assert marked == ([current] if current else [])
