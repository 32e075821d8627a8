"""POST /mcp refuses oversized, malformed, too deep, too large batch and unstorable bodies with a JSON-RPC error
(agents.mcp_gateway.body_limits), before the SDK parses them, and a database pool with no connection in time is a
503."""

import json

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.db import OperationalError

from agents.mcp_gateway import access as mcp_access
from agents.mcp_gateway import server as mcp_server
from agents.mcp_gateway.body_limits import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from tests.support.builders import make_policy, make_tool, make_user
from tests.support.mcp_asgi import McpAsgiClient, asgi_call

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

CALC_SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


@sync_to_async
def operator_key() -> str:
    from agents.access.api_keys import create_api_key

    make_policy(make_tool("calculate", input_schema=CALC_SCHEMA, always_load=True))
    return create_api_key(user=make_user("mcp-operator", role="operator"), name="mcp")[1]


@pytest_asyncio.fixture
async def session(mcp_endpoint):
    client = McpAsgiClient(mcp_endpoint, await operator_key())
    assert (await client.initialize()).status == 200
    return client


async def post(client: McpAsgiClient, body: bytes, **headers):
    return await asgi_call(client.app, "POST", "/mcp", client.headers() | headers, body)


def call_of(expression) -> dict:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "calculate", "arguments": {"expression": expression}}}  # fmt: skip


async def test_a_body_over_the_cap_is_413_whether_or_not_it_says_so(session, settings):
    settings.TOOLHUB_MCP_MAX_BODY_BYTES = 1000
    body = json.dumps(call_of("1 + " * 400)).encode()
    declared = await post(session, body)  # asgi_call sends no Content-Length: the cap is met while reading
    said = await post(session, b"{}", **{"content-length": "5000"})  # refused unread
    for reply in (declared, said):
        assert reply.status == 413 and reply.error["code"] == INVALID_REQUEST
        assert "over 1000 bytes" in reply.error["message"]


async def test_a_body_that_is_not_json_is_a_parse_error(session):
    for body in (b"{not json", b"\xff\xfe{}", b""):
        reply = await post(session, body)
        assert reply.status == 400 and reply.error["code"] == PARSE_ERROR, body


async def test_deep_nesting_is_an_invalid_request_before_any_recursive_parser_sees_it(session, settings):
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": ' + b"[" * 100_000 + b"]" * 100_000
    reply = await post(session, body + b"}}")
    assert reply.status == 400 and reply.error["code"] == INVALID_REQUEST
    assert f"deeper than {settings.TOOLHUB_MCP_MAX_JSON_DEPTH} levels" in reply.error["message"]
    # Brackets inside strings are text, not nesting: the call goes through.
    within = await post(session, json.dumps(call_of("[" * 200 + "1" + "]" * 200)).encode())
    assert within.status == 200 and within.result is not None


async def test_a_batch_over_the_cap_is_an_invalid_request(session, settings):
    settings.TOOLHUB_MCP_MAX_BATCH = 10
    batch = [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(11)]
    reply = await post(session, json.dumps(batch).encode())
    assert reply.status == 400 and reply.error["code"] == INVALID_REQUEST
    assert "11 messages; at most 10" in reply.error["message"]


@pytest.mark.parametrize("text", ["6 * 7\x00", "6 * 7\ud800"])
async def test_a_nul_byte_or_lone_surrogate_is_invalid_params_naming_where(session, text):
    reply = await post(session, json.dumps(call_of(text)).encode())  # json.dumps escapes both: valid JSON
    assert reply.status == 400 and reply.messages[0]["id"] == 7
    assert reply.error["code"] == INVALID_PARAMS
    assert reply.error["message"].startswith("params.arguments.expression contains a NUL byte or a lone surrogate")


async def test_a_key_with_a_nul_byte_is_refused_too(session):
    body = json.dumps({"jsonrpc": "2.0", "id": "a\x00", "method": "tools/list", "params": {"\x00": 1}}).encode()
    reply = await post(session, body)
    assert reply.status == 400 and reply.error["code"] == INVALID_PARAMS
    assert reply.messages[0]["id"] is None  # an id that cannot be stored is not echoed


async def test_a_body_within_every_bound_reaches_the_sdk(session):
    reply = await post(session, json.dumps(call_of("6 * 7")).encode())
    assert reply.status == 200 and json.loads(reply.result["content"][0]["text"])["result"] == 42


async def test_no_database_connection_in_time_is_503_with_retry_after(session, monkeypatch):
    def busy(*args, **kwargs):
        raise OperationalError("FATAL: sorry, too many clients already")

    monkeypatch.setattr(mcp_access, "authenticate_bearer", busy)
    reply = await session.list_tools()
    assert reply.status == 503 and reply.headers["retry-after"] == "2"
    assert reply.error["code"] == mcp_server.SERVER_BUSY and "connection limit" in reply.error["message"]
