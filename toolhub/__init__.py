"""The toolhub Django project: settings, ASGI routing, Celery app, root urls."""

from toolhub.celery import app as celery_app

__all__ = ("celery_app",)
