from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "Catalog"

    def ready(self):
        from . import checks, signals  # noqa: F401  (checks register themselves)

        signals.connect()
