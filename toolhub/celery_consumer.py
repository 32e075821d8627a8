"""The worker's broker consumer (CELERY_WORKER_CONSUMER): Celery's own, made to survive a broker restart.

Why it exists (celery 5.7.0, kombu 5.7.0, Redis transport): on a lost
connection `Consumer.on_connection_error_after_connected` first calls
`connection.collect()`, which detaches the transport from the connection
(`transport.client = None`) but keeps its default channel, and then
`connection.close()`, which closes that channel. Closing a channel that holds
unacknowledged messages (a late-acked turn in flight) restores them through
the transport's connection parameters, read from the detached client:
`AttributeError: 'NoneType' object has no attribute 'hostname'` in
`kombu.transport.redis.Channel._connparams`. `close()` is wrapped in
`ignore_errors`, which ignores connection errors only, so the worker dies.

Here the default channel is closed first, while its transport is attached:
its restore then either works (the broker is back) or fails with a connection
error that is ignored (the messages stay in Redis's unacked set and come back
after the visibility timeout). The channel is then closed, so Celery's own
cleanup has nothing left to restore. Never put anything else in this class.
"""

import logging

from celery.worker.consumer import Consumer as CeleryConsumer

logger = logging.getLogger(__name__)


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc):
        channel = getattr(self.connection, "_default_channel", None) if self.connection else None
        if channel is not None:
            try:
                channel.close()
            except Exception as error:  # teardown of a dead connection: best effort
                logger.info("closing the lost broker channel: %r", error)
        super().on_connection_error_after_connected(exc)
