"""URL map: the dashboard at /, the JSON API under /api/."""

from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from memory_portal.api.api import api, unknown_route
from memory_portal.dashboard import views as dashboard_views

handler500 = "memory_portal.failures.server_error"

urlpatterns = [
    path("login/", dashboard_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", unknown_route),
    path("", include("memory_portal.dashboard.urls")),
]
