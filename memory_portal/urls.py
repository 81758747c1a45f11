"""URL map: the dashboard at /, the JSON API under /api/, the MCP server at /mcp."""

from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from memory_portal import health, metrics
from memory_portal.api.api import api, unknown_route
from memory_portal.api.mcp_server import mcp_view
from memory_portal.dashboard import sso
from memory_portal.dashboard import views as dashboard_views
from memory_portal.dashboard.views.base import with_passwords

handler400 = "memory_portal.failures.bad_request"
handler500 = "memory_portal.failures.server_error"
handler403 = "memory_portal.failures.forbidden"
handler404 = "memory_portal.failures.not_found"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("login/", dashboard_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on (OpenID Connect), when MEMORY_PORTAL_OIDC_ISSUER is set.
    path("sso/start/", sso.sign_in_start, name="sso_start"),
    path("sso/callback/", sso.sign_in_callback, name="sso_callback"),
    # Django's own password reset: the same link sets an invited person's first password. Not
    # found under MEMORY_PORTAL_OIDC_ONLY, where nobody signs in with a password.
    path(
        "password/reset/",
        with_passwords(
            auth_views.PasswordResetView.as_view(
                email_template_name="registration/password_reset_email.txt"
            )
        ),
        name="password_reset",
    ),
    path(
        "password/reset/sent/",
        with_passwords(auth_views.PasswordResetDoneView.as_view()),
        name="password_reset_done",
    ),
    path(
        "password/set/<uidb64>/<token>/",
        with_passwords(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "password/set/done/",
        with_passwords(auth_views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
    path("api/", api.urls),
    # The API never reads the session cookie, so CSRF cannot apply under /api/: a write to a
    # route that does not exist is a JSON 404, as the router's own routes are exempt too.
    re_path(r"^api/(?P<rest>.*)$", csrf_exempt(unknown_route)),
    # The MCP server (Streamable HTTP): the same tools for MCP clients, run-token auth.
    path("mcp", mcp_view, name="mcp"),
    path("", include("memory_portal.dashboard.urls")),
]
