"""Root URLs: the favicon, auth (login, and OAuth for /mcp), the admin, and the URL module of each sub-package that
serves pages or an API (/mcp itself is an ASGI endpoint, mounted in toolhub.asgi)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from agents.observability.views import metrics
from toolhub.rate_limits import login_attempts


class FaviconView(RedirectView):
    """/favicon.ico, which browsers and tools ask for without reading the page: the icon base.html links.
    Resolved per request (not at import), so a deployment's hashed static name is the one redirected to."""

    permanent = False
    http_method_names = ["get", "head", "options"]

    def get_redirect_url(self, *args, **kwargs):
        return static("favicon.svg")


# The admin's own login form takes passwords too: the same limits as /login/ (its route stays the admin's).
admin.site.login = login_attempts(admin.site.login)

urlpatterns = [
    path("favicon.ico", FaviconView.as_view(), name="favicon"),
    path("metrics", metrics, name="metrics"),
    path("login/", login_attempts(auth_views.LoginView.as_view(redirect_authenticated_user=True)), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("agents.mcp_gateway.oauth_urls")),
    path("admin/", admin.site.urls),
    path("", include("catalog.web.urls")),
    path("v1/", include("agents.openai_api.urls")),
    path("", include("agents.console.urls")),
    path("", include("agents.account.urls")),
]
