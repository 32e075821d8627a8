"""is_deferred is the seed's rule, exactly, for every combination of the three flags."""

import itertools

import pytest

from catalog.deferral import is_deferred
from catalog.models import Tool


def expected(name, always_load, is_mcp, should_defer):
    if always_load:
        return False
    if name == "tool_search":
        return False
    if is_mcp:
        return True
    return should_defer


TABLE = [
    (name, always_load, is_mcp, should_defer)
    for name in ("tool_search", "list_campaigns")
    for always_load, is_mcp, should_defer in itertools.product([False, True], repeat=3)
]


@pytest.mark.parametrize("name,always_load,is_mcp,should_defer", TABLE)
def test_is_deferred_table(name, always_load, is_mcp, should_defer):
    tool = Tool(name=name, always_load=always_load, is_mcp=is_mcp, should_defer=should_defer)
    assert is_deferred(tool) is expected(name, always_load, is_mcp, should_defer)


def test_the_search_tool_is_never_deferred_whatever_its_flags():
    for always_load, is_mcp, should_defer in itertools.product([False, True], repeat=3):
        tool = Tool(name="tool_search", always_load=always_load, is_mcp=is_mcp, should_defer=should_defer)
        assert is_deferred(tool) is False


def test_a_name_containing_the_search_tool_name_is_not_special():
    tool = Tool(name="tool_search_v2", is_mcp=True)
    assert is_deferred(tool) is True


def test_mcp_tool_is_deferred_unless_always_load():
    assert is_deferred(Tool(name="get_member", is_mcp=True, should_defer=False)) is True
    assert is_deferred(Tool(name="get_member", is_mcp=True, always_load=True)) is False
