"""manage.py check fails closed on a tool without a decided policy and warns on oversized schemas."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from catalog.checks import tool_schemas_fit_the_token_gate, tools_have_a_decided_policy
from tests.builders import make_policy, make_tool

pytestmark = pytest.mark.django_db


def test_a_new_tool_without_policy_fails_check_and_is_named():
    make_policy(make_tool("fine_tool"))
    make_tool("new_tool")
    (error,) = tools_have_a_decided_policy()
    assert error.id == "catalog.E001"
    assert "new_tool (no policy)" in error.msg and "fine_tool" not in error.msg
    with pytest.raises(SystemCheckError, match="new_tool"):
        call_command("check")


def test_draft_fails_rejected_and_disabled_pass():
    make_policy(make_tool("drafted"), status="draft")
    make_policy(make_tool("refused"), status="rejected")
    make_tool("switched_off", enabled=False)
    (error,) = tools_have_a_decided_policy()
    assert "drafted (draft)" in error.msg
    assert "refused" not in error.msg and "switched_off" not in error.msg


def test_every_tool_decided_means_no_error():
    make_policy(make_tool("fine_tool"))
    assert tools_have_a_decided_policy() == []
    call_command("check")


def test_a_tool_over_the_schema_token_cap_is_a_warning(settings):
    tool = make_tool("huge_tool")
    settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS = tool.schema_tokens - 1
    (warning,) = tool_schemas_fit_the_token_gate()
    assert warning.id == "catalog.W001" and "huge_tool" in warning.msg
    settings.TOOLHUB_MAX_TOOL_SCHEMA_TOKENS = tool.schema_tokens
    assert tool_schemas_fit_the_token_gate() == []
