"""Failed logins per username: past TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT each attempt waits twice as long as the one
before (up to TOOLHUB_LOGIN_BACKOFF_MAX), from whatever address it comes; 429 with Retry-After meanwhile, the same
for a username no account has; a login resets it."""

import re

import pytest

from tests.support.builders import make_user
from toolhub import rate_limits

PASSWORD = "a-long-test-password"
START = 6_000_000.0

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    """Time as the limits (and the in-process cache's expiry) read it; `clock.now` moves it."""

    class Clock:
        now = START

    monkeypatch.setattr(rate_limits.time, "time", lambda: Clock.now)
    return Clock


@pytest.fixture
def backoff(settings, clock):
    settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = 0  # every attempt below comes from an address of its own anyway
    settings.TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT = 3
    settings.TOOLHUB_LOGIN_BACKOFF_MAX = 8
    return clock


class Attempts:
    """Login POSTs for one username, each from another address (the per-address limit never counts twice)."""

    def __init__(self, client, username: str):
        self.client, self.username, self.made = client, username, 0

    def __call__(self, password: str = "wrong"):
        self.made += 1
        body = {"username": self.username, "password": password}
        return self.client.post("/login/", body, REMOTE_ADDR=f"203.0.113.{self.made % 250 + 1}")


def waits(attempt, clock, tries: int) -> list:
    """Fail `tries` times, each as soon as allowed: the Retry-After each was refused with first (None: none)."""
    seen = []
    for _ in range(tries):
        response = attempt()
        if response.status_code == 429:
            seen.append(int(response["Retry-After"]))
            clock.now += int(response["Retry-After"])
            response = attempt()
        else:
            seen.append(None)
        assert response.status_code == 200
    return seen


def test_failures_past_the_threshold_wait_twice_as_long_each_time_up_to_the_cap(client, backoff):
    make_user("ops", password=PASSWORD)
    attempt = Attempts(client, "ops")
    assert waits(attempt, backoff, 3) == [None, None, None]
    refused = attempt()
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    assert "Too many failed logins" in refused.content.decode()
    backoff.now += 1
    assert attempt().status_code == 200
    assert waits(attempt, backoff, 5) == [2, 4, 8, 8, 8]


def test_a_right_password_waits_too_and_then_logs_in_and_resets_the_count(client, backoff):
    make_user("ops", password=PASSWORD)
    attempt = Attempts(client, "ops")
    waits(attempt, backoff, 4)
    refused = attempt(PASSWORD)
    assert refused.status_code == 429 and refused["Retry-After"] == "2"
    backoff.now += 2
    assert attempt(PASSWORD).status_code == 302
    client.logout()
    assert waits(attempt, backoff, 3) == [None, None, None]  # counting starts over
    assert attempt().status_code == 429


def test_another_username_is_not_held_back(client, backoff):
    make_user("ops", password=PASSWORD)
    make_user("other", password=PASSWORD)
    waits(Attempts(client, "ops"), backoff, 5)
    assert Attempts(client, "ops")().status_code == 429
    assert Attempts(client, "other")(PASSWORD).status_code == 302


def test_the_spellings_the_login_form_reads_as_one_username_share_its_count(client, backoff):
    make_user("ops", password=PASSWORD)
    for spelling in ("ops", " ops", "OPS", "\uff4f\uff50\uff53"):  # the last: fullwidth, NFKC makes it "ops"
        Attempts(client, spelling)()
    refused = Attempts(client, "ops ")(PASSWORD)
    assert refused.status_code == 429


def test_the_count_is_forgotten_a_day_after_the_last_attempt(client, backoff):
    attempt = Attempts(client, "ops")
    waits(attempt, backoff, 4)
    backoff.now += rate_limits.LOGIN_FAILURES_MEMORY + 1
    assert waits(attempt, backoff, 3) == [None, None, None]


def page(response, username: str) -> tuple:
    """What a client can tell from an answer, without the per-response CSRF token and the name it sent."""
    text = re.sub(r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"', r"\1", response.content.decode())
    return response.status_code, response.get("Retry-After"), text.replace(username, "NAME")


def test_a_username_no_account_has_gets_the_same_answers(client, backoff):
    make_user("alice", password=PASSWORD)
    answers = {}
    for username in ("alice", "zelda"):
        backoff.now = START + (0 if username == "alice" else 10_000)
        attempt = Attempts(client, username)
        answers[username] = [page(attempt(), username) for _ in range(5)]
    assert answers["alice"] == answers["zelda"]
    assert [status for status, _, _ in answers["alice"]] == [200, 200, 200, 429, 429]


def test_zero_turns_the_account_limit_off(client, backoff, settings):
    settings.TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT = 0
    attempt = Attempts(client, "ops")
    assert [attempt().status_code for _ in range(10)] == [200] * 10


def test_the_admins_login_is_held_back_the_same_way(client, backoff):
    make_user("ops", password=PASSWORD)
    waits(Attempts(client, "ops"), backoff, 3)
    refused = client.post("/admin/login/", {"username": "ops", "password": PASSWORD}, REMOTE_ADDR="192.0.2.1")
    assert refused.status_code == 429 and refused["Retry-After"] == "1"


def test_an_unreachable_cache_lets_logins_through(client, backoff, settings):
    down = {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"socket_connect_timeout": 1}}
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", **down}}
    make_user("ops", password=PASSWORD)
    attempt = Attempts(client, "ops")
    assert [attempt().status_code for _ in range(5)] + [attempt(PASSWORD).status_code] == [200] * 5 + [302]
