"""The turn queue's depth, read from the Celery broker at scrape time through kombu (Redis or RabbitMQ).

A passive `queue_declare` answers the number of messages waiting in the queue on both brokers (Redis: the lengths of
the queue's priority lists; RabbitMQ: its ready messages) and creates nothing; a queue the broker does not know has
none waiting (Redis drops an empty queue's key). Each process keeps one connection between scrapes (opening one costs
more than the read) and drops it at the first error. Connecting and every socket read are bounded by BROKER_TIMEOUT,
with at most one fresh connection after a kept one failed, so a broker that is down or hangs costs a scrape at most
twice BROKER_TIMEOUT and never fails it. Never publishes or consumes a message.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from kombu import Connection

log = logging.getLogger(__name__)

BROKER_TIMEOUT = 1.0  # seconds: connecting, and each read of the broker's answer

_lock = threading.Lock()  # a kombu connection is not shared between threads: scrapes read it in turn
_kept: tuple[str, Connection] | None = None  # (broker URL, the connection) kept between scrapes


def queue_depth(queue: str) -> int | None:
    """Messages waiting in `queue` (published, not yet taken by a worker); None when the broker cannot be read."""
    global _kept
    url = settings.CELERY_BROKER_URL
    with _lock:
        for _ in range(2):
            fresh = _kept is None or _kept[0] != url
            try:
                if fresh:
                    _drop()
                    _kept = (url, _connect(url))
                assert _kept is not None
                return _waiting(_kept[1], queue)
            except Exception as exc:  # down, refused, timed out, or an answer it should not give: never the scrape's
                _drop()
                if fresh:
                    log.warning("the broker's queue %s could not be read: %s", queue, exc)
                    return None
    return None


def _connect(url: str) -> Connection:
    options = dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {})
    # Redis reads socket_*, py-amqp read_/write_timeout; each transport ignores the other's.
    for name in ("socket_timeout", "socket_connect_timeout", "read_timeout", "write_timeout"):
        options[name] = BROKER_TIMEOUT
    connection = Connection(url, connect_timeout=BROKER_TIMEOUT, transport_options=options)
    try:
        connection.ensure_connection(max_retries=0)  # one attempt: kombu's default retries for seconds
    except Exception:
        connection.release()
        raise
    return connection


def _waiting(connection: Connection, queue: str) -> int:
    channel = connection.default_channel
    try:
        return channel.queue_declare(queue=queue, passive=True).message_count
    except connection.channel_errors as exc:
        if str(getattr(exc, "reply_code", "")) == "404":  # NOT_FOUND; py-amqp reopens the channel it closed
            return 0
        raise


def _drop() -> None:
    global _kept
    if _kept is not None:
        try:
            _kept[1].release()
        except Exception:  # a connection that is already broken: nothing left to close
            pass
    _kept = None
