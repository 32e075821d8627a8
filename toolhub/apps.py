"""The project's own app: sets up what every process needs once Django is (traces, toolhub/tracing.py)."""

from django.apps import AppConfig


class ToolhubConfig(AppConfig):
    name = "toolhub"
    verbose_name = "toolhub"

    def ready(self):
        from . import tracing

        # Before Django loads its middleware (after every app is ready), so the instrumentation's comes first.
        tracing.setup()
