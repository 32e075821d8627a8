"""The address the per-address limits count: X-Forwarded-For only from a trusted proxy (TOOLHUB_TRUSTED_PROXIES),
the right-most hop not itself trusted; from anyone else, the peer's own address."""

import json
from pathlib import Path

import pytest
import yaml
from django.test import RequestFactory

from tests.toolhub.test_settings import run_python
from toolhub.client_address import client_address

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ROTATED = [f"198.51.100.{i}" for i in range(1, 31)]


@pytest.fixture
def loopback_trusted(settings):
    settings.TOOLHUB_TRUSTED_PROXIES = ["127.0.0.0/8", "::1"]


def address(peer: str, forwarded: str | None = None) -> str:
    headers = {"REMOTE_ADDR": peer} | ({"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {})
    return client_address(RequestFactory().get("/", **headers))


def test_a_forwarded_for_from_an_untrusted_peer_is_ignored(loopback_trusted):
    assert address("203.0.113.5", "198.51.100.1") == "203.0.113.5"
    assert address("203.0.113.5", "127.0.0.1") == "203.0.113.5"


def test_a_trusted_proxy_names_the_client(loopback_trusted):
    assert address("127.0.0.1", "198.51.100.1") == "198.51.100.1"
    assert address("::1", "2001:db8::7") == "2001:db8::7"
    assert address("127.0.0.1") == "127.0.0.1"  # a request of the proxy's own, or of a local client


def test_the_client_is_the_right_most_hop_not_itself_trusted(settings):
    settings.TOOLHUB_TRUSTED_PROXIES = ["127.0.0.1", "10.0.0.0/8"]
    # What the client wrote comes first; each proxy appends the address it was reached from.
    assert address("127.0.0.1", "1.2.3.4, 198.51.100.7, 10.1.2.3") == "198.51.100.7"
    assert address("10.0.0.2", "10.1.1.1, 10.2.2.2") == "10.1.1.1"  # trusted all the way: the furthest hop
    assert address("192.0.2.1", "10.1.1.1") == "192.0.2.1"


def test_what_is_not_an_address_ends_the_chain_at_the_last_trusted_hop(loopback_trusted):
    assert address("127.0.0.1", "not-an-address") == "127.0.0.1"
    assert address("127.0.0.1", "198.51.100.7, junk") == "127.0.0.1"
    assert address("127.0.0.1", "") == "127.0.0.1"


def test_ports_and_mapped_addresses_are_read_as_their_address(loopback_trusted):
    assert address("::ffff:127.0.0.1", "198.51.100.7:4711") == "198.51.100.7"
    assert address("127.0.0.1", "[2001:db8::7]:4711") == "2001:db8::7"
    assert address("::ffff:203.0.113.5", "198.51.100.7") == "203.0.113.5"


def test_no_peer_address_is_unknown():
    request = RequestFactory().get("/")
    del request.META["REMOTE_ADDR"]
    assert client_address(request) == "unknown"


def login(client, attempt: int, peer: str):
    body = {"username": f"someone{attempt}", "password": "wrong"}
    return client.post("/login/", body, REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=ROTATED[attempt])


@pytest.mark.django_db
def test_rotating_forwarded_for_from_an_untrusted_peer_hits_the_login_limit(client, settings, loopback_trusted):
    settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = 20
    statuses = [login(client, attempt, "203.0.113.5").status_code for attempt in range(30)]
    assert statuses == [200] * 20 + [429] * 10


@pytest.mark.django_db
def test_the_trusted_proxys_forwarded_for_counts_each_client_apart(client, settings, loopback_trusted):
    settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = 2
    assert [login(client, attempt, "127.0.0.1").status_code for attempt in range(30)] == [200] * 30
    same = [client.post("/login/", {}, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.9").status_code
            for _ in range(3)]  # fmt: skip
    assert same == [200, 200, 429]


@pytest.mark.django_db
def test_client_registration_counts_the_peer_not_its_forwarded_for(client, settings, loopback_trusted):
    settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = 2
    statuses = [
        client.post("/oauth/register", json.dumps({}), content_type="application/json",
                    REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR=forwarded).status_code
        for forwarded in ROTATED[:3]
    ]  # fmt: skip
    assert statuses == [400, 400, 429]


def test_daphne_is_never_told_to_believe_forwarded_headers():
    """Daphne's --proxy-headers takes X-Forwarded-For's first address from whoever sends it: toolhub decides."""
    files = [DEPLOY / "Procfile", DEPLOY / "compose.yaml", *sorted((DEPLOY / "systemd").glob("*.service"))]
    assert [path.name for path in files if "--proxy-headers" in path.read_text()] == []


def test_compose_trusts_the_balancers_address_only():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    balancer = compose["services"]["balancer"]["networks"]["default"]["ipv4_address"]
    for web in ("web1", "web2"):
        assert compose["services"][web]["environment"]["TOOLHUB_TRUSTED_PROXIES"] == balancer


def test_a_trusted_proxy_that_is_not_an_address_stops_the_settings(tmp_path):
    result = run_python("import django; django.setup()", tmp_path, TOOLHUB_TRUSTED_PROXIES="127.0.0.1,balancer")
    assert result.returncode != 0 and "TOOLHUB_TRUSTED_PROXIES" in result.stderr and "'balancer'" in result.stderr
