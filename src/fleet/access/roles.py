"""The standard roles for people, as Django groups with Django's own permission codenames, so
that any page or view can ask `user.has_perm("jobs.add_job")`:

* **viewer** — every `view_*` permission of the fleet's apps: reads everything the API and the
  dashboard show;
* **operator** — viewer, plus `jobs.add_job` (dispatch and preview reruns), `jobs.change_job`
  (cancel jobs) and `inventory.change_device` (move devices through their lifecycle: record repairs,
  close circuit breakers, accept);
* **admin** — every permission there is (give such people `is_staff` for the admin site too).

Created by this app's data migration and re-synced by `fleet roles` (after a new model, say):
a role's permissions are set to exactly these, so a permission granted to a group by hand is
taken away again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
#: The apps whose objects the fleet's people read.
FLEET_APPS = ("inventory", "policies", "jobs", "burnin")
OPERATOR_PERMISSIONS = ("jobs.add_job", "jobs.change_job", "inventory.change_device")


NO_ROLE = "no role"


#: What acting as an operator, or reading as a viewer, takes (the dashboard and the API check the same).
DISPATCH_PERMISSION = "jobs.add_job"
VIEW_PERMISSION = "burnin.view_policyprogress"


def role_from(*, superuser: bool, groups: Iterable[str], permissions: Iterable[str]) -> str:
    """The role a person acts in — one definition, shown alike by the dashboard's header, its
    refusals and `fleet users list`: a superuser is an admin (every permission); anyone else holds
    the highest standard role whose group they are in, or, given permissions one by one, the role
    those permissions amount to (dispatching makes an operator, reading the progress a viewer)."""
    if superuser:
        return ADMIN
    held = set(groups)
    for role in reversed(ROLES):
        if role in held:
            return role
    granted = set(permissions)
    if DISPATCH_PERMISSION in granted:
        return OPERATOR
    if VIEW_PERMISSION in granted:
        return VIEWER
    return NO_ROLE


def role_of(user: Any) -> str:
    """`role_from` for a request's user (its permissions as Django's backends cache them)."""
    if not user.is_authenticated:
        return "signed out"
    if user.is_superuser:
        return ADMIN
    return role_from(
        superuser=False, groups=[g.name for g in user.groups.all()], permissions=user.get_all_permissions()
    )


def _label(permission: Any) -> str:
    return f"{permission.content_type.app_label}.{permission.codename}"


@transaction.atomic
def roles_sync(group_model: Any = None, permission_model: Any = None) -> dict[str, list[str]]:
    """Create or update the three groups; returns each role's permissions (`app.codename`).
    The models are parameters so that the data migration can pass its historical ones."""
    if group_model is None or permission_model is None:
        from django.contrib.auth.models import Group, Permission

        group_model, permission_model = Group, Permission
    every = list(permission_model.objects.select_related("content_type"))
    viewer = [p for p in every if p.content_type.app_label in FLEET_APPS and p.codename.startswith("view_")]
    operator = viewer + [p for p in every if _label(p) in OPERATOR_PERMISSIONS]
    granted = {VIEWER: viewer, OPERATOR: operator, ADMIN: every}
    for role, permissions in granted.items():
        group, _ = group_model.objects.get_or_create(name=role)
        group.permissions.set(permissions)
    return {role: sorted(_label(p) for p in permissions) for role, permissions in granted.items()}


# --- roles from the identity provider's groups (OpenID Connect sign-in) ------------------------------


def role_for_groups(groups: Iterable[str], role_groups: dict[str, tuple[str, ...]]) -> str | None:
    """The role a person's provider groups map to: the highest role any of them is mapped to, or
    None (no mapped group: no role). `role_groups`: role → the provider's group names."""
    held = set(groups)
    for role in reversed(ROLES):
        if held & set(role_groups.get(role, ())):
            return role
    return None


def person_role_set(user: Any, role: str | None) -> None:
    """Give a person exactly this standard role (none: no role), keeping any other group: applied
    at every sign-in through the provider, so a person removed from a group loses its role then."""
    from django.contrib.auth.models import Group

    kept = [g for g in user.groups.all() if g.name not in ROLES]
    wanted = [Group.objects.get_or_create(name=role)[0]] if role else []
    user.groups.set(kept + wanted)
