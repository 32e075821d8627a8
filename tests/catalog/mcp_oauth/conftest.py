import pytest

from tests.support.oauth_upstream import start_upstream


@pytest.fixture
def upstream():
    """An OAuth-protected MCP server and its authorization server (tests/support/oauth_upstream.py)."""
    upstream, server = start_upstream()
    yield upstream
    server.should_exit = True
