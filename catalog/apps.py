from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "Catalog"

    def ready(self):
        from .policies import checks  # noqa: F401  (checks register themselves)
        from .search import signals

        signals.connect()
