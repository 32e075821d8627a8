"""is_deferred is the seed's rule, exactly, for every combination of the three flags.

Seed 000 states the rule twice, in two orders. Its first listing checks the
search tool first (always_load -> search tool -> isMcp -> shouldDefer); its
final function checks the search tool after isMcp, which would defer an MCP
tool named like the search tool. toolhub keeps the search tool never deferred
in both readings, so the ``tool_search, is_mcp=True, always_load=False`` rows
below expect False: a deferred search tool could never be called to load
anything.

The expected values are written out by hand, one row per combination, so the
table does not copy the code's order.
"""

import itertools

import pytest

from catalog.models import Tool
from catalog.policies.deferral import is_deferred

# (name, always_load, is_mcp, should_defer, expected is_deferred)
TABLE = [
    # An ordinary tool: always_load wins, then is_mcp, then should_defer.
    ("list_campaigns", False, False, False, False),
    ("list_campaigns", False, False, True, True),
    ("list_campaigns", False, True, False, True),
    ("list_campaigns", False, True, True, True),
    ("list_campaigns", True, False, False, False),
    ("list_campaigns", True, False, True, False),
    ("list_campaigns", True, True, False, False),
    ("list_campaigns", True, True, True, False),
    # The search tool, as a non-MCP tool: never deferred.
    ("tool_search", False, False, False, False),
    ("tool_search", False, False, True, False),
    ("tool_search", True, False, False, False),
    ("tool_search", True, False, True, False),
    # The search tool, as an MCP tool: never deferred either (the seed's two
    # orders disagree only on the always_load=False rows; toolhub says False).
    ("tool_search", False, True, False, False),
    ("tool_search", False, True, True, False),
    ("tool_search", True, True, False, False),
    ("tool_search", True, True, True, False),
]


def test_the_table_covers_every_combination_for_both_names():
    for name in ("list_campaigns", "tool_search"):
        combos = {(a, m, s) for n, a, m, s, _ in TABLE if n == name}
        assert combos == set(itertools.product([False, True], repeat=3))
    assert len(TABLE) == 16


@pytest.mark.parametrize("name,always_load,is_mcp,should_defer,deferred", TABLE)
def test_is_deferred_table(name, always_load, is_mcp, should_defer, deferred):
    tool = Tool(name=name, always_load=always_load, is_mcp=is_mcp, should_defer=should_defer)
    assert is_deferred(tool) is deferred


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
