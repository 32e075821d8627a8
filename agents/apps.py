from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        from catalog.policies.sidestep import register_result_source
        from catalog.policies.versions import register_replay_source
        from catalog.search.signals import bump_catalog_version

        from .models import ActionWord, IntentExample, ModelProfile, MoodWord
        from .turns.routing_log import recent_replays, recent_tool_results

        # Policy simulations (catalog's policy page) replay the requests this app logs, and read what tools returned.
        register_replay_source(recent_replays)
        register_result_source(recent_tool_results)

        # The router's evidence and /mcp's result budget (agents.mcp_gateway.server.result_token_limit) are read once
        # per catalog state: a new action word or example, or a changed model profile, must move it.
        for model in (ActionWord, IntentExample, MoodWord, ModelProfile):
            name = model.__name__
            post_save.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_{name}_save")
            post_delete.connect(bump_catalog_version, sender=model, dispatch_uid=f"catalog_version_{name}_delete")
