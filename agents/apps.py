from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        from catalog.signals import bump_catalog_version

        from .models import ActionWord, IntentExample, MoodWord

        # The router's evidence is cached per catalog state: a new action word or example must move it.
        for model in (ActionWord, IntentExample, MoodWord):
            name = model.__name__
            post_save.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_{name}_save")
            post_delete.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_{name}_delete")
