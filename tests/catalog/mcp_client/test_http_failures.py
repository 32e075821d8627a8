"""A streamable HTTP MCP server that refuses toolhub says why: the status, what it asked for, what to do."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from catalog.mcp_client.client import McpServerUnavailable, connect
from catalog.models import McpServer

CHALLENGE = 'Bearer resource_metadata="https://auth.example/.well-known/oauth-protected-resource"'


@pytest.fixture
def refusing_server():
    """An HTTP server answering every request with the status (and WWW-Authenticate) the test sets."""
    answer = {"status": 401, "challenge": CHALLENGE, "authorization": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer["authorization"].append(self.headers.get("Authorization"))
            self.send_response(answer["status"])
            if answer["challenge"]:
                self.send_header("WWW-Authenticate", answer["challenge"])
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_DELETE = do_POST

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/mcp", answer
    server.shutdown()


def failure(url: str, name: str, **fields) -> str:
    with pytest.raises(McpServerUnavailable) as refused:
        connect(McpServer(name=name, transport="streamable_http", url=url, **fields))
    return str(refused.value)


def test_a_401_names_the_status_the_challenge_and_the_missing_credentials(refusing_server):
    url, _ = refusing_server

    message = failure(url, "locked")

    assert f"{url} answered 401 Unauthorized" in message and CHALLENGE in message
    assert "toolhub sent no credentials: add an Authorization header" in message
    assert "Server returned an error response" not in message


def test_a_refused_token_is_named_without_showing_it(refusing_server):
    url, answer = refusing_server

    message = failure(url, "wrong-token", headers={"Authorization": "Bearer s3cret-token"})

    assert answer["authorization"][0] == "Bearer s3cret-token"  # it was sent
    assert "The Authorization header in this server's headers was refused" in message
    assert "s3cret-token" not in message


@pytest.mark.parametrize(
    "status, says",
    [
        (403, "answered 403 Forbidden"),
        (404, "Is this the server's MCP endpoint"),
        (503, "answered 503 Service Unavailable: the server failed"),
    ],
)
def test_other_refusals_say_what_to_check(refusing_server, status, says):
    url, answer = refusing_server
    answer.update(status=status, challenge="")

    assert says in failure(url, f"refuses-{status}")


def test_nothing_listening_is_said_plainly():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there

    message = failure(f"http://127.0.0.1:{port}/mcp", "nobody")

    assert f"nothing answered at http://127.0.0.1:{port}/mcp" in message
