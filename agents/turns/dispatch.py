"""The one module that hands a turn's work to Celery: a turn to run (or resume), an approval's timeout.

Tasks are named here, not imported: agents.tasks imports the runtime, which asks this module to enqueue, so the
names keep the lifecycle free of an import cycle; Celery's registry resolves a name to the registered task
(eager or not), and a test checks that each name is registered. Work is enqueued after the caller's
transaction commits, so a task never runs before its rows exist. With eager Celery (the embedded default, no
broker) what must not run inside the caller's request runs on a daemon thread of this process instead. Never runs
a turn itself.
"""

import contextvars
import logging
import math
import threading
from typing import TypedDict

from celery import Task, current_app
from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from agents.models import Turn

from .events import FailureReason
from .lifecycle import fail_turn

log = logging.getLogger(__name__)
BROKER_DOWN = "The task queue could not take the turn; send the request again shortly."

RUN_TURN = "agents.tasks.run_turn"
EXPIRE_APPROVAL = "agents.tasks.expire_approval"
TASK_NAMES = (RUN_TURN, EXPIRE_APPROVAL)


def _task(name: str) -> Task:
    if name not in current_app.tasks:
        # The apps' tasks modules, imported as a worker imports them at its start (autodiscovery): a web process
        # that has not imported agents.tasks yet registers its tasks here.
        current_app.loader.import_default_modules()
    return current_app.tasks[name]


def is_eager() -> bool:
    """True when tasks run in the caller's process (the embedded default has no broker)."""
    eager: bool = current_app.conf.task_always_eager
    return eager


def enqueue_turn(turn_id: int) -> None:
    """Hand the turn to Celery once its rows are committed (runs now when eager): a new turn, one an approval's
    decision resumes, or one the watchdog queued again."""
    transaction.on_commit(lambda: publish_turn(turn_id))


def publish_turn(turn_id: int) -> bool:
    """Send the turn's task now; False when the broker did not take it within TOOLHUB_BROKER_WAIT seconds, and the
    turn then fails with broker_unavailable (its streams end with the error frame and [DONE]) instead of waiting
    queued for a task that does not exist."""
    if is_eager():
        _task(RUN_TURN).delay(turn_id)
        return True
    Turn.objects.filter(pk=turn_id).update(published_at=timezone.now())
    try:
        _task(RUN_TURN).apply_async((turn_id,), retry=True, retry_policy=broker_retry_policy())
    except Exception as error:  # kombu's OperationalError, the transport's own errors: no common base class
        log.warning("turn %s: the broker did not take its task (%r); the turn fails", turn_id, error)
        fail_turn(turn_id, FailureReason.BROKER_UNAVAILABLE, BROKER_DOWN, detail=f"{BROKER_DOWN} ({error})")
        return False
    return True


class RetryPolicy(TypedDict):
    """Kombu's publish retry options (apply_async's retry_policy)."""

    max_retries: int
    interval_start: float
    interval_step: float
    interval_max: float


def broker_retry_policy() -> RetryPolicy:
    """Kombu's publish retries spread over TOOLHUB_BROKER_WAIT: every half second, the first at once."""
    wait = max(0.0, settings.TOOLHUB_BROKER_WAIT)
    return {"max_retries": math.ceil(wait / 0.5), "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}


def start_in_background(turn_id: int) -> None:
    """Enqueue the turn after commit without waiting for it: for a page that must answer at once.

    With a broker the worker runs it anyway. Eager Celery would run it inside the request, so it runs in a daemon
    thread of this process instead, as approvals' timeouts do there.
    """
    if not is_eager():
        enqueue_turn(turn_id)
        return
    # The thread runs in a copy of the request's context: the turn joins the request's trace (a worker's turn does
    # through the task's headers) and its log lines carry the request id too.
    transaction.on_commit(lambda: threading.Thread(target=contextvars.copy_context().run,
                                                   args=(_run_in_thread, turn_id), daemon=True,
                                                   name=f"turn-{turn_id}").start())  # fmt: skip


def _run_in_thread(turn_id: int) -> None:
    close_old_connections()
    try:
        _task(RUN_TURN).delay(turn_id)
    finally:
        connections.close_all()  # this thread's own connections: nothing else closes them


def schedule_approval_timeout(approval_id: int, delay: float) -> None:
    """Expire the approval `delay` seconds from now unless it was decided by then."""
    if is_eager():
        # No broker to hold a countdown in the embedded default: a timer thread of this process.
        timer = threading.Timer(delay, _task(EXPIRE_APPROVAL).delay, args=(approval_id,))
        timer.daemon = True
        timer.start()
    else:
        _task(EXPIRE_APPROVAL).apply_async(args=(approval_id,), countdown=delay)
