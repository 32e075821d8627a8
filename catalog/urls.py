from django.urls import path

from . import views

urlpatterns = [
    path("catalog/", views.catalog_list, name="catalog"),
    path("catalog/<str:name>/", views.tool_detail, name="tool-detail"),
    path("policies/", views.policy_list, name="policies"),
    path("policies/<str:name>/", views.policy_detail, name="policy-detail"),
    path("policies/<str:name>/rollback/<int:number>/", views.policy_rollback, name="policy-rollback"),
    path("knowledge/", views.knowledge_list, name="knowledge"),
    path("knowledge/export.csv", views.knowledge_export, name="knowledge-export"),
    path("knowledge/<slug:key>/", views.knowledge_detail, name="knowledge-detail"),
    path("knowledge/<slug:key>/review", views.knowledge_review, name="knowledge-review"),
]
