"""The signed-in user's own settings, mounted at the root by toolhub.urls."""

from django.urls import path

from . import views

urlpatterns = [
    path("account/", views.account, name="account"),
]
