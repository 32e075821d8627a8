"""Workflow lifecycle. Expiry: active workflows past expires_at are marked expired, in batches.

Concurrency is the database's job (compare-and-set on version, unique
idempotency keys); nothing here checks and then writes in Python.
"""

import logging

from django.utils import timezone

from .models import Workflow

log = logging.getLogger(__name__)


def expire_workflows(*, now=None, batch_size: int = 500) -> int:
    """Mark every active workflow past its expiry as expired; never touches unexpired ones."""
    now = now or timezone.now()
    expired = 0
    while True:
        batch = list(
            Workflow.objects.filter(status=Workflow.Status.ACTIVE, expires_at__lte=now).values_list("pk", flat=True)[
                :batch_size
            ]
        )
        if not batch:
            break
        expired += Workflow.objects.filter(pk__in=batch, status=Workflow.Status.ACTIVE, expires_at__lte=now).update(
            status=Workflow.Status.EXPIRED
        )
    log.info("expired %d workflow(s)", expired)
    return expired
