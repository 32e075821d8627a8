"""run_builtin is the runtime's one entry point: it knows the five builtin tools and never raises."""

import dataclasses
import logging

import pytest

from agents import tools  # the package: its builtin tools
from agents.tools import BUILTIN_TOOL_NAMES, ToolResult, run_builtin


def test_builtin_tool_names_are_the_five_builtin_tools():
    assert frozenset({"calculate", "get_current_time", "get_current_date", "web_search", "dns_lookup"}) == (
        BUILTIN_TOOL_NAMES
    )


def test_unknown_tool_is_an_error_result_naming_it():
    result = run_builtin("rm_rf", {}, emit=_no_status)
    assert result == ToolResult(result.content, is_error=True)
    assert "'rm_rf'" in result.content and "calculate" in result.content


def test_arguments_that_are_not_an_object_are_an_error_result():
    result = run_builtin("calculate", ["1 + 1"], emit=_no_status)
    assert result.is_error is True


def test_an_unexpected_failure_becomes_an_error_result_and_is_logged(monkeypatch, caplog):
    def broken(expression):
        raise RuntimeError("bug")

    monkeypatch.setattr(tools.calculator, "evaluate", broken)
    with caplog.at_level(logging.ERROR, logger="agents.tools"):
        result = run_builtin("calculate", {"expression": "1 + 1"}, emit=_no_status)
    assert result.is_error is True
    assert "calculate" in result.content and "bug" not in result.content
    assert "builtin tool calculate failed" in caplog.text


def test_tool_result_is_frozen():
    result = ToolResult({"ok": True})
    assert result.is_error is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.is_error = True


def _no_status(phase, message, **data):
    raise AssertionError("no status expected")
