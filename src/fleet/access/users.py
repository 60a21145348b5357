"""People: add a user with one of the standard roles, and list who holds which.

A role is membership of its group (`fleet.access.roles`); an admin also gets `is_staff` for the
admin site. The password goes through Django's validators (`AUTH_PASSWORD_VALIDATORS`), and a
refused name, role or password changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AbstractUser, Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Field

from fleet.access.roles import ADMIN, ROLES, role_from, role_of, roles_sync


@dataclass(frozen=True)
class Person:
    username: str
    role: str  # the role they act in (`fleet.access.roles.role_of`), as the dashboard shows it
    roles: tuple[str, ...]  # the standard roles' groups they are in
    superuser: bool
    active: bool
    staff: bool
    last_login: datetime | None


@transaction.atomic
def user_add(*, username: str, role: str, password: str) -> Person:
    """Create `username` holding `role`. Refused (`ValidationError` naming the field) for an
    unknown role, a name that exists or that Django refuses, or a password its validators refuse."""
    User = get_user_model()
    if role not in ROLES:
        raise ValidationError({"role": [f"Unknown role {role!r}; the roles are {', '.join(ROLES)}."]})
    username_field = User._meta.get_field(User.USERNAME_FIELD)
    assert isinstance(username_field, Field)
    try:
        username_field.clean(username, None)
    except ValidationError as exc:
        raise ValidationError({"username": exc.messages}) from exc
    if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
        raise ValidationError({"username": [f"A user named {username!r} exists already."]})
    user = User(**{User.USERNAME_FIELD: username})
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise ValidationError({"password": exc.messages}) from exc
    user.set_password(password)
    user.is_staff = role == ADMIN
    user.save()
    if not Group.objects.filter(name=role).exists():
        roles_sync()
    user.groups.add(Group.objects.get(name=role))
    return _person(user)


def users_list() -> list[Person]:
    """Every user with the role they act in and the standard roles they hold, by name (a constant
    number of queries: groups and permissions are prefetched)."""
    User = get_user_model()
    people = User.objects.prefetch_related(
        "groups__permissions__content_type", "user_permissions__content_type"
    ).order_by(User.USERNAME_FIELD)
    return [_person(user, _permissions(user)) for user in people]


def _permissions(user: AbstractUser) -> set[str]:
    """`app.codename` of every permission the user holds, directly or through a group (prefetched)."""
    granted = [*user.user_permissions.all(), *(p for g in user.groups.all() for p in g.permissions.all())]
    return {f"{p.content_type.app_label}.{p.codename}" for p in granted}


def _person(user: AbstractUser, permissions: set[str] | None = None) -> Person:
    groups = {g.name for g in user.groups.all()}
    roles = tuple(sorted(groups & set(ROLES), key=ROLES.index))
    role = (
        role_from(superuser=user.is_superuser, groups=groups, permissions=permissions)
        if permissions is not None
        else role_of(user)
    )
    return Person(user.get_username(), role, roles, user.is_superuser, user.is_active, user.is_staff, user.last_login)
