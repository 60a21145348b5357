"""Every route of the service: each app's API under /api/v1/, the schema and its docs, the admin
and people's login. The only place that knows every app's URLs."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerSplitView

from fleet.access import oidc
from fleet.core import errors, oauth, schema

# Burn-in and the lifecycle first: their `satellites/resource-classes/`, `satellites/fingerprints/`
# and `satellites/node-states/` must be tried before the satellites router's `satellites/<pk>/` (the
# routers match any path segment as an id).
api_v1 = [
    path("", include("fleet.burnin.api.urls")),
    path("", include("fleet.autopilot.api.urls")),
    path("", include("fleet.lifecycle.api.urls")),
    path("", include("fleet.repairs.api.urls")),
    path("", include("fleet.inventory.api.urls")),
    path("", include("fleet.policies.api.urls")),
    path("", include("fleet.jobs.api.urls")),
    path("", include("fleet.events.api.urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    # People sign in and out (and change their own password) here. No password reset: it mails a
    # link and no mail backend is configured (an administrator sets a forgotten password).
    path("accounts/login/", oidc.SignIn.as_view(), name="login"),
    # People sign in with the company's identity provider (OpenID Connect; docs/oidc.md).
    path("oidc/login/", oidc.OidcLogin.as_view(), name="oidc-login"),
    path("oidc/callback/", oidc.OidcCallback.as_view(), name="oidc-callback"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    # Only what machines need: the token endpoint and revocation (fleet.core.oauth).
    path("o/", include((oauth.urlpatterns, "oauth2_provider"))),
    path("api/schema/", schema.CachedSchemaView.as_view(), name="schema"),
    # The split view serves its init script as a file, and the page has no inline style: the
    # Content-Security-Policy allows neither inline (fleet.core.csp).
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="api_docs/swagger_ui.html"),
        name="swagger-ui",
    ),
    path("api/v1/", include(api_v1)),
    # Anything else under /api/ is a JSON 404, whatever DEBUG says.
    re_path(r"^api/", errors.api_not_found),
    # Browsers ask for /favicon.ico whatever the page links: answer with the icon, not a logged 404.
    path("favicon.ico", RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True)),
    path("", include("fleet.dashboard.urls")),
]

handler400 = "fleet.core.errors.handler400"
handler403 = "fleet.core.errors.handler403"
handler404 = "fleet.core.errors.handler404"
handler500 = "fleet.core.errors.handler500"
