"""Overlong request lines and headers get an answer, never a silent close: at a real Daphne serving toolhub.asgi
(431 or 414, toolhub.header_limits) and behind the shipped HAProxy (deploy/haproxy.cfg, which refuses them itself
with a short 400, or 431 from HAProxy 3.2). Also what that Daphne sends on /v1 and /mcp: the pages' security
headers, and HSTS when the request came through a TLS proxy. Raw sockets: the bytes as a client sends them."""

import socket
import subprocess
import time

import pytest

from tests.support.servers import ROOT, daphne, embedded_env, free_port, output_of, start, wait_for_port
from tests.support.streams import wait_until

pytestmark = pytest.mark.integration

HAPROXY = "/usr/sbin/haproxy"
HEAD = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
OVERLONG = {
    "authorization-64KB": HEAD + b"Authorization: Bearer " + b"a" * 65536 + b"\r\nConnection: close\r\n\r\n",
    "cookie-100KB": HEAD + b"Cookie: x=" + b"a" * 102400 + b"\r\nConnection: close\r\n\r\n",
    "request-line-20KB": b"GET /v1/models?q=" + b"a" * 20000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "600-fields": HEAD + b"".join(b"X-H%d: a\r\n" % i for i in range(600)) + b"Connection: close\r\n\r\n",
}


def exchange(port: int, data: bytes) -> bytes:
    """Send `data`, then read until the server closes: everything it answered (b"" for a silent close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(data)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return answer


def head_and_body(answer: bytes) -> tuple[list[bytes], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


def get(port: int, path: str, **headers: str) -> tuple[int, dict[str, str]]:
    fields = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    lines, _body = head_and_body(exchange(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}"
                                                f"Connection: close\r\n\r\n".encode()))  # fmt: skip
    found = dict(line.decode().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {name.lower(): value for name, value in found.items()}


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """The Daphne port and the balancer's port in front of it (web1 and web2 of haproxy.cfg both on that Daphne)."""
    env = embedded_env(tmp_path_factory.mktemp("headers")) | {
        "TOOLHUB_WARM_START": "0",
        "TOOLHUB_BEHIND_TLS_PROXY": "1",
        "SECURE_HSTS_SECONDS": "3600",
    }
    with daphne(env) as base:
        daphne_port = int(base.rsplit(":", 1)[1])
        balancer_port = free_port()
        balancer_env = env | {"TOOLHUB_BALANCER_BIND": f"127.0.0.1:{balancer_port}",
                              "TOOLHUB_WEB1_PORT": str(daphne_port), "TOOLHUB_WEB2_PORT": str(daphne_port)}  # fmt: skip
        balancer, log = start([HAPROXY, "-W", "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")], balancer_env)
        try:
            wait_for_port(balancer_port, balancer, log)
            wait_until(lambda: get(balancer_port, "/healthz")[0] == 200, 60, "the balancer passing requests on")
            yield daphne_port, balancer_port
        finally:
            balancer.terminate()
            try:
                balancer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                balancer.kill()
                raise AssertionError(output_of(log)) from None
            log.close()


@pytest.mark.parametrize("name", OVERLONG)
def test_daphne_answers_overlong_request_lines_and_headers(web, name):
    daphne_port, _balancer = web
    lines, body = head_and_body(exchange(daphne_port, OVERLONG[name]))

    expected = b"HTTP/1.1 414 URI Too Long" if name.startswith("request-line") else b"HTTP/1.1 431 Request Header"
    assert lines[0].startswith(expected), lines
    assert b"Connection: close" in lines and 0 < len(body) < 200
    assert get(daphne_port, "/healthz")[0] == 200  # and serves on


@pytest.mark.parametrize("name", OVERLONG)
def test_the_balancer_answers_overlong_request_lines_and_headers(web, name):
    _daphne, balancer_port = web
    lines, body = head_and_body(exchange(balancer_port, OVERLONG[name]))

    assert lines[0].split()[1] in (b"400", b"431"), lines
    assert 0 < len(body) < 500


def test_a_request_that_fits_the_balancers_buffer_reaches_daphne(web):
    _daphne, balancer_port = web

    assert get(balancer_port, "/healthz", x_long="a" * 14000)[0] == 200


@pytest.mark.parametrize("path", ["/v1/models", "/mcp"])
def test_v1_and_mcp_carry_the_pages_security_headers_and_hsts_over_tls(web, path):
    daphne_port, _balancer = web
    status, plain = get(daphne_port, path)
    _status, over_tls = get(daphne_port, path, x_forwarded_proto="https")

    assert status == 401  # no credentials
    assert plain["x-content-type-options"] == "nosniff" and plain["x-frame-options"] == "DENY"
    assert plain["referrer-policy"] == plain["cross-origin-opener-policy"] == "same-origin"
    assert "frame-ancestors 'none'" in plain["content-security-policy"]
    assert "strict-transport-security" not in plain
    assert over_tls["strict-transport-security"].startswith("max-age=3600")


def test_a_client_still_sending_after_the_answer_is_cut_off(web):
    daphne_port, _balancer = web
    with socket.create_connection(("127.0.0.1", daphne_port), timeout=30) as client:
        client.sendall(HEAD + b"X-Long: " + b"a" * 20000)
        assert client.recv(12) == b"HTTP/1.1 431"
        started = time.monotonic()
        with pytest.raises(OSError):  # the server closes once its linger is over
            while time.monotonic() - started < 20:
                client.sendall(b"a" * 1000)
                time.sleep(0.05)
