"""web_search talks SearXNG's JSON API and dns_lookup resolves names; both fail as error results, on loopback only."""

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from agents.tools import run_builtin, web


class SearxngStub(BaseHTTPRequestHandler):
    """Answers /<mode>/search like SearXNG: ok, fail (HTTP 500), slow (past the client's timeout), html."""

    def do_GET(self):
        url = urlsplit(self.path)
        self.server.requests.append((url.path, parse_qs(url.query)))
        mode = url.path.strip("/").split("/")[0]
        if mode == "fail":
            self._send(500, b'{"error": "boom"}')
        elif mode == "slow":
            self.server.release.wait(10)
            self._send(200, b'{"results": []}')
        elif mode == "html":
            self._send(200, b"<html>Too many requests</html>", "text/html")
        else:
            query = parse_qs(url.query)["q"][0]
            results = [
                {"title": f"Result {n}", "url": f"https://example.org/{n}", "content": f"  snippet\n {n} "}
                for n in range(8)
            ]
            results.insert(1, {"title": "no url", "content": "skipped"})
            self._send(200, json.dumps({"query": query, "number_of_results": 8, "results": results}).encode())

    def _send(self, status, body, content_type="application/json"):
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (the timeout test)
            pass

    def log_message(self, format, *args):
        pass


@pytest.fixture
def searxng(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("no_proxy", "*")
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearxngStub)
    server.requests = []
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join()


def _base(server, mode):
    return f"http://127.0.0.1:{server.server_address[1]}/{mode}"


def test_search_emits_its_query_then_returns_trimmed_results(searxng, settings):
    settings.SEARXNG_URL = _base(searxng, "ok") + "/"
    statuses = []
    arguments = {"query": "toolhub release notes", "max_results": 3}

    result = run_builtin("web_search", arguments, emit=lambda *args, **data: statuses.append((args, data)))

    assert statuses == [
        (
            ("tool_execution", '🔍 Searching the web: "toolhub release notes"'),
            {"tool_name": "web_search", "arguments": arguments},
        )
    ]
    assert result.is_error is False
    assert result.content == {
        "query": "toolhub release notes",
        "results": [
            {"title": "Result 0", "url": "https://example.org/0", "snippet": "snippet 0"},
            {"title": "Result 1", "url": "https://example.org/1", "snippet": "snippet 1"},
            {"title": "Result 2", "url": "https://example.org/2", "snippet": "snippet 2"},
        ],
    }
    [(path, params)] = searxng.requests
    assert path == "/ok/search"
    assert params == {"q": ["toolhub release notes"], "format": ["json"]}


def test_search_returns_five_results_by_default(searxng, settings):
    settings.SEARXNG_URL = _base(searxng, "ok")
    result = run_builtin("web_search", {"query": "anything"}, emit=lambda *args, **data: None)
    assert len(result.content["results"]) == 5


def test_unset_searxng_url_says_search_is_not_configured(settings, monkeypatch):
    monkeypatch.delenv("SEARXNG_URL", raising=False)
    settings.SEARXNG_URL = ""
    statuses = []
    result = run_builtin("web_search", {"query": "weather in Hanoi"}, emit=lambda *args, **data: statuses.append(args))
    assert result.is_error is True
    assert result.content == "Web search is not configured (set SEARXNG_URL)."
    assert statuses == []


def test_searxng_url_comes_from_the_environment_when_settings_do_not_define_it(searxng, settings, monkeypatch):
    del settings.SEARXNG_URL
    monkeypatch.setenv("SEARXNG_URL", _base(searxng, "ok"))
    result = run_builtin("web_search", {"query": "anything", "max_results": 1}, emit=lambda *args, **data: None)
    assert result.is_error is False and len(result.content["results"]) == 1


def test_searxng_url_must_be_http(settings):
    settings.SEARXNG_URL = "file:///etc/passwd"
    result = run_builtin("web_search", {"query": "anything"}, emit=lambda *args, **data: None)
    assert result.is_error is True and "http" in result.content


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("fail", "Web search failed: the search service answered HTTP 500."),
        ("html", "Web search failed: the search service did not answer with JSON."),
        ("slow", "Web search timed out after 0.2 seconds."),
    ],
)
def test_search_failures_are_error_results(searxng, settings, mode, says):
    settings.SEARXNG_URL = _base(searxng, mode)
    settings.TOOLHUB_WEB_SEARCH_TIMEOUT = 0.2
    result = run_builtin("web_search", {"query": "anything"}, emit=lambda *args, **data: None)
    assert result.is_error is True
    assert result.content == says


def test_unreachable_search_service_is_an_error_result(settings, monkeypatch):
    monkeypatch.setenv("no_proxy", "*")
    with socket.socket() as closed:  # a loopback port that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.SEARXNG_URL = f"http://127.0.0.1:{port}"
    result = run_builtin("web_search", {"query": "anything"}, emit=lambda *args, **data: None)
    assert result.is_error is True and "could not reach the search service" in result.content


def test_localhost_resolves_to_the_loopback_address():
    result = run_builtin("dns_lookup", {"hostname": "localhost", "record_type": "A"}, emit=_no_status)
    assert result.is_error is False
    assert result.content["hostname"] == "localhost"
    assert result.content["record_type"] == "A"
    assert "127.0.0.1" in result.content["records"]


def test_invalid_hostname_is_an_error_result_without_a_query(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)
    result = run_builtin("dns_lookup", {"hostname": "not a host!"}, emit=_no_status)
    assert result.is_error is True and "not a valid hostname" in result.content


def test_unresolvable_hostname_is_an_error_result(monkeypatch):
    def not_found(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", not_found)
    result = run_builtin("dns_lookup", {"hostname": "shop.example.invalid"}, emit=_no_status)
    assert result.is_error is True
    assert result.content == "Could not resolve shop.example.invalid (A): Name or service not known."


def test_stuck_resolver_times_out_into_an_error():
    release = threading.Event()

    def stuck(*args, **kwargs):
        release.wait(10)
        raise socket.gaierror(socket.EAI_AGAIN, "late")

    original = socket.getaddrinfo
    socket.getaddrinfo = stuck
    try:
        with pytest.raises(web.DnsLookupError, match="timed out after 0.05 seconds"):
            web.dns_lookup("slow.example.com", "A", timeout=0.05)
    finally:
        socket.getaddrinfo = original
        release.set()


def test_mx_without_dnspython_says_a_resolver_is_needed(monkeypatch):
    monkeypatch.setitem(sys.modules, "dns", None)
    result = run_builtin("dns_lookup", {"hostname": "example.com", "record_type": "MX"}, emit=_no_status)
    assert result.is_error is True
    assert "MX needs a DNS resolver library (dnspython)" in result.content


@pytest.fixture
def dns_server():
    """A one-zone DNS server on 127.0.0.1: MX and TXT for example.test, NXDOMAIN for anything else."""
    import dns.message  # dnspython is a pinned requirement: a missing one fails, never skips
    import dns.rcode
    import dns.rdatatype
    import dns.resolver
    import dns.rrset

    records = {
        ("example.test.", "MX"): ["10 mail.example.test.", "20 backup.example.test."],
        ("example.test.", "TXT"): ['"v=spf1 -all"'],
    }
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                wire, client = sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(wire)
            question = query.question[0]
            key = (question.name.to_text(), dns.rdatatype.to_text(question.rdtype))
            response = dns.message.make_response(query)
            if key in records:
                response.answer.append(dns.rrset.from_text_list(question.name, 300, "IN", key[1], records[key]))
            else:
                response.set_rcode(dns.rcode.NXDOMAIN)
            sock.sendto(response.to_wire(), client)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = sock.getsockname()[1]
    yield resolver
    stop.set()
    thread.join()
    sock.close()


def test_mx_and_txt_records_come_from_the_resolver(dns_server):
    mx = web.dns_lookup("example.test", "mx", resolver=dns_server, timeout=2)
    assert mx == {
        "hostname": "example.test",
        "record_type": "MX",
        "records": ["10 mail.example.test.", "20 backup.example.test."],
    }
    assert web.dns_lookup("example.test", "TXT", resolver=dns_server, timeout=2)["records"] == ["v=spf1 -all"]


def test_missing_domain_is_nxdomain(dns_server):
    with pytest.raises(web.DnsLookupError, match=r"nowhere.test does not exist \(NXDOMAIN\)"):
        web.dns_lookup("nowhere.test", "NS", resolver=dns_server, timeout=2)


def _no_network(*args, **kwargs):
    raise AssertionError("no lookup expected")


def _no_status(phase, message, **data):
    raise AssertionError("dns_lookup sends no status")
