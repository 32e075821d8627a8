from django.urls import path

from . import converters, mcp_oauth_views, mcp_views, policy_views, review_views, views  # noqa: F401  (converters registers <tool:...>)

urlpatterns = [
    path("catalog/", views.catalog_list, name="catalog"),
    path("catalog/<tool:name>/", views.tool_detail, name="tool-detail"),
    path("catalog/<tool:name>/examples/", views.tool_example_add, name="tool-example-add"),
    path("catalog/<tool:name>/examples/<int:pk>/", views.tool_example_edit, name="tool-example-edit"),
    path("catalog/<tool:name>/examples/<int:pk>/delete/", views.tool_example_delete, name="tool-example-delete"),
    path("policies/", policy_views.policy_list, name="policies"),
    # "-" keeps the queue apart from the tools' pages: a tool may be named "review", never "-/review".
    path("policies/-/review/", review_views.policy_review, name="policy-review"),
    path("policies/<tool:name>/", policy_views.policy_detail, name="policy-detail"),
    path("policies/<tool:name>/simulate", policy_views.policy_simulation, name="policy-simulate"),
    path("policies/<tool:name>/rollback/<int:number>/", policy_views.policy_rollback, name="policy-rollback"),
    path("policies/<tool:name>/changes/<int:pk>/", policy_views.policy_change_decide, name="policy-change-decide"),
    path("policies/<tool:name>/always-load", policy_views.policy_always_load, name="policy-always-load"),
    path("knowledge/", views.knowledge_list, name="knowledge"),
    path("knowledge/export.csv", views.knowledge_export, name="knowledge-export"),
    path("knowledge/bulk", views.knowledge_bulk, name="knowledge-bulk"),
    path("knowledge/<slug:key>/", views.knowledge_detail, name="knowledge-detail"),
    path("knowledge/<slug:key>/review", views.knowledge_review, name="knowledge-review"),
    path("knowledge/<slug:key>/review/undo", views.knowledge_undo_review, name="knowledge-review-undo"),
    path("mcp-servers/", mcp_views.server_list, name="mcp-servers"),
    path("mcp-servers/add/", mcp_views.server_add, name="mcp-server-add"),
    path("mcp-servers/<slug:name>/", mcp_views.server_detail, name="mcp-server-detail"),
    path("mcp-servers/<slug:name>/edit/", mcp_views.server_edit, name="mcp-server-edit"),
    path("mcp-servers/<slug:name>/test/", mcp_views.test_connection, name="mcp-server-test"),
    path("mcp-servers/<slug:name>/sync/", mcp_views.start_sync, name="mcp-server-sync"),
    path("mcp-servers/<slug:name>/progress/", mcp_views.sync_progress, name="mcp-server-progress"),
    path("mcp-servers/<slug:name>/oauth/connect/", mcp_oauth_views.connect, name="mcp-server-oauth-connect"),
    path("mcp-servers/<slug:name>/oauth/disconnect/", mcp_oauth_views.disconnect, name="mcp-server-oauth-disconnect"),
    # "-" keeps the callback apart from the servers' pages: a server may be named "oauth", never "-/oauth-callback".
    path("mcp-servers/-/oauth-callback/", mcp_oauth_views.callback, name="mcp-oauth-callback"),
]
