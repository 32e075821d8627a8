"""A process makes one SDK client per model server, key and timeout and keeps it (agents.providers.openai_compat):
every turn and every steward call used to make its own (~20 ms of CPU for its SSL context, and a new connection)."""

import pytest

from agents.providers import Upstream, get_provider, openai_compat
from agents.router import llm

SERVER = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _no_clients_yet(monkeypatch):
    monkeypatch.setattr(openai_compat, "_sdk_clients", type(openai_compat._sdk_clients)())
    monkeypatch.setenv("TEST_MODEL_KEY_1", "k-1")
    monkeypatch.setenv("TEST_MODEL_KEY_2", "k-2")


def upstream(key="TEST_MODEL_KEY_1", base_url=SERVER, model="m") -> Upstream:
    return Upstream(model=model, base_url=base_url, api_key_env=key, profile="test")


def test_turns_of_one_server_and_key_share_a_client_and_another_key_or_server_gets_its_own():
    first, second = get_provider(upstream()), get_provider(upstream(model="another"))
    assert first.client is second.client
    assert get_provider(upstream(key="TEST_MODEL_KEY_2")).client is not first.client
    assert get_provider(upstream(base_url="http://127.0.0.1:10/v1")).client is not first.client
    assert first.client.max_retries == 0  # the provider's deadline makes the retries


def test_a_forked_process_makes_its_own(monkeypatch):
    parent = get_provider(upstream()).client
    monkeypatch.setattr(openai_compat.os, "getpid", lambda: -1)
    assert get_provider(upstream()).client is not parent


def test_the_least_recently_used_client_is_dropped_past_the_bound(monkeypatch):
    monkeypatch.setattr(openai_compat, "SDK_CLIENTS", 2)
    a = openai_compat.sdk_client(SERVER, "a", timeout=5)
    b = openai_compat.sdk_client(SERVER, "b", timeout=5)
    assert openai_compat.sdk_client(SERVER, "a", timeout=5) is a  # a is now the most recently used
    openai_compat.sdk_client(SERVER, "c", timeout=5)
    assert len(openai_compat._sdk_clients) == 2
    assert openai_compat.sdk_client(SERVER, "a", timeout=5) is a
    assert openai_compat.sdk_client(SERVER, "b", timeout=5) is not b


def test_the_llm_stewards_calls_share_one_client(settings):
    assert llm.client(upstream()) is llm.client(upstream())
    assert llm.client(upstream()).timeout == settings.TOOLHUB_STEWARD_OPTIONS["analysis_timeout"]
