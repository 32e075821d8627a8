"""The worker's broker consumer (CELERY_WORKER_CONSUMER): Celery's own, made to survive a Redis restart.

Why (celery 5.7.0, kombu 5.7.0, Redis transport; the latest releases): when the
connection drops while the consumer waits in BRPOP and holds an unacknowledged
message (a late-acked turn running in a prefork child), Celery's
`on_connection_error_after_connected` calls `connection.collect()`. That closes
the default channel, but the Redis channel's `close()` first reads the pending
BRPOP reply, which raises the connection error and leaves the channel open;
collect() then detaches the transport (`transport.client = None`). The
following `connection.close()` closes the channel again, now reaching the
restore of the unacked message, which reads its connection parameters from the
detached client: `AttributeError: 'NoneType' object has no attribute
'hostname'` in `kombu.transport.redis.Channel._connparams`. `close()` runs
under `ignore_errors`, which ignores connection errors only: the consumer, and
with it the worker, dies.

Here the channel is closed first, while its transport is still attached, with
any teardown error swallowed: the unacked message is restored if Redis is back,
or stays in Redis's unacked set (redelivered after the visibility timeout) if
not; Celery's own cleanup then finds the channel closed. Never put anything
else in this class.
"""

import logging

from celery.worker.consumer import Consumer as CeleryConsumer

log = logging.getLogger(__name__)


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc):
        channel = getattr(self.connection, "_default_channel", None) if self.connection else None
        # Twice at most: the first close may stop at the pending BRPOP read; the second restores and closes.
        for _attempt in range(2):
            if channel is None or channel.closed:
                break
            try:
                channel.close()
            except Exception as error:  # tearing down a dead connection: best effort
                log.info("closing the lost broker channel: %r", error)
        super().on_connection_error_after_connected(exc)
