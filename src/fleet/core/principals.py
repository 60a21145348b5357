"""Who is calling: a person (Django user, session) or a machine client (OAuth2 bearer token),
optionally bound to one satellite, which confines it to that satellite's site."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from uuid import UUID

from django.apps import apps


@dataclass(eq=False)
class ClientPrincipal:
    """`request.user` for bearer-token requests (client-credentials tokens carry no person)."""

    token: Any
    user: Any = None
    is_authenticated: bool = field(default=True, init=False)
    is_anonymous: bool = field(default=False, init=False)
    is_active: bool = field(default=True, init=False)
    is_staff: bool = field(default=False, init=False)
    is_superuser: bool = field(default=False, init=False)
    pk: None = field(default=None, init=False)
    id: None = field(default=None, init=False)

    @property
    def application(self) -> Any:
        return self.token.application

    @cached_property
    def satellite(self) -> Any | None:
        """The satellite this client is bound to, with its site (one query, once per request)."""
        Satellite = apps.get_model("inventory", "Satellite")
        return (
            Satellite.objects.select_related("site")
            .filter(credential__application_id=self.token.application_id)
            .first()
        )

    @property
    def site_id(self) -> UUID | None:
        satellite = self.satellite
        return satellite.site_id if satellite else None

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False

    def has_perms(self, perms: Any, obj: Any = None) -> bool:
        return False

    def get_username(self) -> str:
        return f"client:{self.application.name}"

    def __str__(self) -> str:
        return self.get_username()


def actor_label(user: Any) -> str:
    """A short, stable description of who did something, for audit fields."""
    if isinstance(user, ClientPrincipal):
        return user.get_username()
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.get_username()}"
    return "system"


def site_restriction(user: Any) -> UUID | None:
    """The only site a caller may act on, or None when it is not confined to one site."""
    if isinstance(user, ClientPrincipal) and user.satellite is not None:
        return user.satellite.site_id
    return None


def ensure_acts_as_satellite(user: Any, satellite: Any) -> None:
    """A satellite-bound client may act only as its own satellite (403 otherwise)."""
    from fleet.core.errors import PermissionDeniedError

    if isinstance(user, ClientPrincipal) and user.satellite is not None and user.satellite.id != satellite.id:
        raise PermissionDeniedError(
            f"This client is bound to satellite {user.satellite}; it cannot act as {satellite}."
        )


def ensure_site_allowed(user: Any, site_id: UUID) -> None:
    """A satellite-bound client may act only on its own site (403 otherwise)."""
    from fleet.core.errors import PermissionDeniedError

    restricted = site_restriction(user)
    if restricted is not None and restricted != site_id:
        raise PermissionDeniedError("This client is bound to another site.")
