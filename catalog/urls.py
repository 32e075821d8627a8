from django.urls import path

from . import views

urlpatterns = [
    path("catalog/", views.catalog_list, name="catalog"),
    path("catalog/<str:name>/", views.tool_detail, name="tool-detail"),
]
