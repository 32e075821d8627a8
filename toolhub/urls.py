"""Root URLs: auth (login, and OAuth for /mcp), the dashboard pages of each app, the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from toolhub.rate_limits import login_attempts

urlpatterns = [
    path("login/", login_attempts(auth_views.LoginView.as_view(redirect_authenticated_user=True)), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("agents.oauth_urls")),
    path("admin/", admin.site.urls),
    path("", include("catalog.urls")),
    path("", include("agents.urls")),
]
