"""The one module that hands a turn's work to Celery: a turn to run (or resume), an approval's timeout.

Tasks are named here, not imported: agents.tasks imports the runtime, which asks this module to enqueue, so the
names keep the lifecycle free of an import cycle; Celery's registry resolves a name to the registered task
(eager or not), and a test checks that each name is registered. Work is enqueued after the caller's
transaction commits, so a task never runs before its rows exist. With eager Celery (the embedded default, no
broker) what must not run inside the caller's request runs on a daemon thread of this process instead. Never runs
a turn itself.
"""

import threading

from celery import current_app
from django.db import close_old_connections, connections, transaction

RUN_TURN = "agents.tasks.run_turn"
EXPIRE_APPROVAL = "agents.tasks.expire_approval"
TASK_NAMES = (RUN_TURN, EXPIRE_APPROVAL)


def _task(name: str):
    if name not in current_app.tasks:
        # The apps' tasks modules, imported as a worker imports them at its start (autodiscovery): a web process
        # that has not imported agents.tasks yet registers its tasks here.
        current_app.loader.import_default_modules()
    return current_app.tasks[name]


def is_eager() -> bool:
    """True when tasks run in the caller's process (the embedded default has no broker)."""
    return current_app.conf.task_always_eager


def enqueue_turn(turn_id: int) -> None:
    """Hand the turn to Celery once its rows are committed (runs now when eager): a new turn, one an approval's
    decision resumes, or one the watchdog queued again."""
    _task(RUN_TURN).delay_on_commit(turn_id)


def start_in_background(turn_id: int) -> None:
    """Enqueue the turn after commit without waiting for it: for a page that must answer at once.

    With a broker the worker runs it anyway. Eager Celery would run it inside the request, so it runs in a daemon
    thread of this process instead, as approvals' timeouts do there.
    """
    if not is_eager():
        enqueue_turn(turn_id)
        return
    transaction.on_commit(lambda: threading.Thread(target=_run_in_thread, args=(turn_id,), daemon=True,
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
