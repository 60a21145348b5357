"""Who may see and do what on the dashboard: the same Django permissions the API checks for
session users, so a page hides what its viewer may not do and the server refuses it regardless."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin, PermissionRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.access.roles import (
    ADMIN,
    DISPATCH_PERMISSION,
    OPERATOR,
    OPERATOR_PERMISSIONS,
    VIEW_PERMISSION,
    VIEWER,
    role_of,
)
from fleet.core.exceptions import NotFoundError
from fleet.core.replica import replica_reads
from fleet.inventory.selectors import SiteNotFound, site_list

#: What reading the burn-in pages takes (the API's reads check the same).
VIEW_PROGRESS = VIEW_PERMISSION
VIEW_EXECUTIONS = "burnin.view_testexecution"
VIEW_JOBS = "jobs.view_job"
VIEW_DEVICES = "inventory.view_device"
VIEW_CERTIFICATES = "burnin.view_acceptancecertificate"
VIEW_FINGERPRINTS = "burnin.view_fingerprintsnapshot"
#: Preview and dispatch reruns (the rerun-plans API checks the same), and cancel jobs.
DISPATCH = DISPATCH_PERMISSION
CANCEL = "jobs.change_job"
#: Record repairs and close circuit breakers (the lifecycle API checks the same).
REPAIR = "inventory.change_device"


#: Permissions only the admin role holds among the dashboard's pages (webhook subscriptions).
ADMIN_ONLY_APPS = ("events.",)


def role_needed(permissions: Any) -> str:
    """The least standard role (`fleet.access.roles`) holding these permissions."""
    if any(str(p).startswith(ADMIN_ONLY_APPS) for p in permissions):
        return ADMIN
    return OPERATOR if set(permissions) & set(OPERATOR_PERMISSIONS) else VIEWER


def dashboard_context(request: HttpRequest) -> dict[str, Any]:
    """Template context for every page: the role, and which actions to offer."""
    user = request.user
    return {
        "role": role_of(user),
        "can_dispatch": user.is_authenticated and user.has_perm(DISPATCH),
        "can_cancel": user.is_authenticated and user.has_perm(CANCEL),
        "can_repair": user.is_authenticated and user.has_perms([REPAIR, DISPATCH]),
        "can_see_webhooks": user.is_authenticated and user.has_perm("events.view_subscription"),
    }


class Page(LoginRequiredMixin, PermissionRequiredMixin):
    """A dashboard page: signed-in people with the page's `permission_required`; a signed-in
    person without it gets the 403 page, a signed-out one the login page; what a selector does not
    find is the 404 page."""

    request: HttpRequest  # set by View.setup before dispatch

    #: What this page lets a person do, for the refusal that names the role it takes.
    action = "read the dashboard"

    #: Read this page's domain data from the replica (DATABASE_REPLICA_URL), on GET: for pages
    #: whose reader can live with the replica's lag (aggregates), never for the page someone lands
    #: on right after a write.
    replica_ok = False

    def get_permission_denied_message(self) -> str:
        """The 403 page's words: this page's action and the role it takes (finding 7: a person
        without a role was told to ask for the operator role "to dispatch or cancel")."""
        return (
            f"To {self.action} you need the {role_needed(self.get_permission_required())} role "
            f"(yours: {role_of(self.request.user)}). Ask an administrator for it."
        )

    def handle_no_permission(self) -> Any:
        """A machine's bearer token (a satellite's, say) does not open the dashboard: refused (403),
        not sent to a sign-in page it cannot use. A live part's request (htmx) whose session ended
        gets a 401 the page turns into its "session ended — sign in again" banner (dashboard.js):
        a sign-in page swapped into the page, or a table swapped for nothing, would not say so."""
        if not self.request.user.is_authenticated and "HTTP_AUTHORIZATION" in self.request.META:
            raise PermissionDenied("An API token does not open the dashboard: people sign in, machines use the API.")
        if not self.request.user.is_authenticated and getattr(self.request, "htmx", False):
            return session_ended()
        return super().handle_no_permission()

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        reads = replica_reads() if self.replica_ok and request.method in ("GET", "HEAD") else nullcontext()
        try:
            with reads:
                return super().dispatch(request, *args, **kwargs)
        except NotFoundError as exc:
            # The 404 page says what was not found; a mistyped site lists the sites there are.
            known = site_list() if isinstance(exc, SiteNotFound) else None
            return render(request, "404.html", {"message": exc.detail, "sites": known}, status=404)


#: The header a live part's 401 carries: dashboard.js shows the banner on it.
SESSION_ENDED = "session-ended"


def session_ended() -> HttpResponse:
    response = HttpResponse("Your session ended: sign in again.", status=401, content_type="text/plain")
    response["HX-Trigger"] = SESSION_ENDED
    return response
