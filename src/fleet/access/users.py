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

from fleet.access.roles import ADMIN, ROLES, role_of, roles_sync


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
    """Every user with the standard roles they hold, by name (two queries)."""
    User = get_user_model()
    return [_person(user) for user in User.objects.prefetch_related("groups").order_by(User.USERNAME_FIELD)]


def _person(user: AbstractUser) -> Person:
    roles = tuple(sorted({g.name for g in user.groups.all()} & set(ROLES), key=ROLES.index))
    return Person(
        user.get_username(), role_of(user), roles, user.is_superuser, user.is_active, user.is_staff, user.last_login
    )
