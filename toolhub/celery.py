"""The Celery app: configuration from Django settings (CELERY_*), tasks autodiscovered per app."""

import os

from celery import Celery
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import worker_init, worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

app = Celery("toolhub")
# The app of every thread (Celery's current_app): a thread of Daphne or a turn's thread finds the tasks by name
# (agents.turns.dispatch) in this app's registry, not in Celery's empty fallback app.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_worker_pid: int | None = None  # the worker's main process (a prefork pool's processes are its children)


@worker_init.connect
def remember_worker_process(**kwargs):
    global _worker_pid
    _worker_pid = os.getpid()


@worker_ready.connect
def warm_search_index(sender=None, **kwargs):
    """A worker whose turns run in this process (solo pool) loads the embedding models and builds the search and
    example indexes before it takes turns. A prefork worker's main process runs no turn: it loads nothing (each
    model would cost it hundreds of MB) and its pool processes warm themselves (warm_pool_process)."""
    if isinstance(getattr(sender, "pool", None), PreforkPool):
        return
    from agents.router import warm_up

    warm_up()


@worker_process_init.connect
def trace_pool_process(**kwargs):
    """A prefork pool process exports its spans with an exporter and thread of its own (toolhub/tracing.py); the
    worker's main process set traces up when Django started (toolhub.apps)."""
    from toolhub import tracing

    tracing.setup()


@worker_process_init.connect
def warm_pool_process(**kwargs):
    """A prefork pool process was forked before the worker warmed up, so it loads the models and builds the indexes
    (from the stored vectors) itself, at its start rather than in its first turn. On a thread: Celery kills a pool
    process that takes over 4 s to start. A turn that comes meanwhile waits for the index being built, not
    building another. The solo pool sends this signal from the worker's main process: worker_ready warms that."""
    if _worker_pid is None or os.getpid() == _worker_pid:
        return
    from agents.router import warm_up_in_background

    warm_up_in_background()


@worker_ready.connect
def take_over_stalled_turns(**kwargs):
    """A worker that starts (often: replacing one that died) first takes over the turns left stalled."""
    from agents.turns.watchdog import watch_turns

    watch_turns()
