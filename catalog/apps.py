from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "Catalog"

    def ready(self):
        from . import checks  # noqa: F401  (registers the fail-closed and token-gate checks)
