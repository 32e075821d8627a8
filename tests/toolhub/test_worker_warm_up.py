"""Where a Celery worker warms its search state: in the process that runs the turns, not in a prefork parent."""

import os
from types import SimpleNamespace

import pytest
from celery.concurrency.prefork import TaskPool as PreforkPool

import agents.router
from toolhub import celery as worker_signals


@pytest.fixture
def warm_ups(monkeypatch):
    calls = []
    monkeypatch.setattr(agents.router, "warm_up", lambda: calls.append("in the foreground"))
    monkeypatch.setattr(agents.router, "warm_up_in_background", lambda: calls.append("on a thread"))
    return calls


def test_a_prefork_pool_process_warms_itself_on_a_thread(warm_ups, monkeypatch):
    monkeypatch.setattr(worker_signals, "_worker_pid", os.getpid() + 1)  # this process is a child of the worker

    worker_signals.warm_pool_process(sender="worker@host")

    assert warm_ups == ["on a thread"]


def test_the_worker_process_itself_is_not_warmed_by_its_pool_starting(warm_ups, monkeypatch):
    monkeypatch.setattr(worker_signals, "_worker_pid", os.getpid())  # the solo pool sends it from here

    worker_signals.warm_pool_process(sender="worker@host")

    assert warm_ups == []


def test_a_prefork_workers_main_process_runs_no_turn_and_loads_no_model(warm_ups):
    worker_signals.warm_search_index(sender=SimpleNamespace(pool=PreforkPool(limit=2)))

    assert warm_ups == []


def test_a_worker_whose_turns_run_in_its_own_process_warms_before_it_takes_any(warm_ups):
    worker_signals.warm_search_index(sender=SimpleNamespace(pool=object()))  # solo: not a prefork pool

    assert warm_ups == ["in the foreground"]


def test_the_warm_up_loads_the_token_counters_encoding_too(monkeypatch, settings):
    from catalog.search import service as search

    settings.TOOLHUB_WARM_START = True
    done = []
    monkeypatch.setattr(search, "prepare_search", lambda: done.append("search"))
    # warm_up closes this thread's connections when done; a connection an earlier test left open would
    # otherwise need database access this test has no use for.
    monkeypatch.setattr(search, "close_old_connections", lambda: done.append("connections closed"))
    # What warm_up runs after search: each step recorded instead of loading the models.
    steps = [lambda step=step: done.append(step.__name__) for step in agents.router.WARM_UP]
    monkeypatch.setattr(agents.router, "WARM_UP", tuple(steps))

    agents.router.warm_up()

    assert done == ["search", "prepare_routing", "encoding", "connections closed"]
