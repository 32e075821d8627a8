from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        from catalog.signals import bump_catalog_version

        from .models import ActionWord

        # The router's vocabulary is cached per catalog state: a new action word must move it.
        post_save.connect(bump_catalog_version, sender=ActionWord, dispatch_uid="catalog_version_action_word_save")
        post_delete.connect(bump_catalog_version, sender=ActionWord, dispatch_uid="catalog_version_action_word_delete")
