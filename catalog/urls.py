from django.urls import path

from . import views

urlpatterns = [
    path("catalog/", views.catalog_list, name="catalog"),
    path("catalog/<str:name>/", views.tool_detail, name="tool-detail"),
    path("catalog/<str:name>/examples/", views.tool_example_add, name="tool-example-add"),
    path("catalog/<str:name>/examples/<int:pk>/", views.tool_example_edit, name="tool-example-edit"),
    path("catalog/<str:name>/examples/<int:pk>/delete/", views.tool_example_delete, name="tool-example-delete"),
]
