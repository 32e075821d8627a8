"""The Celery app: configuration from Django settings (CELERY_*), tasks autodiscovered per app."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

app = Celery("toolhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def warm_search_index(**kwargs):
    """A worker loads the embedding model and builds the search and example indexes before it takes turns."""
    from agents.router import warm_up

    warm_up()


@worker_ready.connect
def take_over_stalled_turns(**kwargs):
    """A worker that starts (often: replacing one that died) first takes over the turns left stalled."""
    from agents.watchdog import watch_turns

    watch_turns()
