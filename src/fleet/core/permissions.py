"""One permission class for every API view, and the table of what each operation needs.

Views declare `required_scopes` and `required_permissions`, either as a list or as a dict keyed
by HTTP method (`"GET"`, `"POST"`, or `"*"` for the rest); an `@action` may override either.
A caller acts with the least of what it was granted:

* a session (a person) needs the view's Django model permissions;
* a bearer token needs the view's scopes, and when its client is a person's automation (an
  operator client) its owner must also hold the view's permissions *now*: the token's scopes
  and the owner's permissions intersect on every request, so a person who loses `jobs.add_job`
  stops dispatching through every client they own;
* a satellite's client is confined by its scopes (the satellite ones) and by its identity
  (`fleet.inventory.identity`).

Fail closed: a view that declares no `required_permissions` for a method admits no person and
no operator client (`[]` must be written out to mean "any signed-in person").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oauth2_provider.contrib.rest_framework import TokenHasScope

_UNDECLARED = object()


def _for_method(value: Any, method: str) -> Any:
    if isinstance(value, dict):
        value = value.get(method, value.get("*", _UNDECLARED))
    return value


def view_scopes(view: Any, method: str) -> list[str]:
    value = _for_method(getattr(view, "required_scopes", []), method)
    return [] if value is _UNDECLARED else list(value or [])


def view_permissions(view: Any, method: str) -> list[str] | None:
    """The model permissions a person needs for `method` on `view`; None when undeclared."""
    value = _for_method(getattr(view, "required_permissions", _UNDECLARED), method)
    return None if value is _UNDECLARED else list(value or [])


def acting_person(request: Any) -> Any:
    """The person whose model permissions a request acts with: the signed-in user, or for a bearer
    token its client's owner; None for a satellite's client (it has scopes, never permissions)."""
    if hasattr(request.auth, "scope"):
        return getattr(request.user, "owner", None)
    return request.user


class ScopeOrModelPermission(TokenHasScope):
    def has_permission(self, request, view) -> bool:
        permissions = view_permissions(view, request.method)
        if hasattr(request.auth, "scope"):
            if not super().has_permission(request, view):
                return False
            owner = acting_person(request)
            if owner is None:
                return True  # a satellite's client: confined by its scopes and its identity
            return permissions is not None and owner.has_perms(permissions)
        user = request.user
        if not (user and user.is_authenticated) or permissions is None:
            return False
        return user.has_perms(permissions)

    def get_scopes(self, request, view) -> list[str]:
        return view_scopes(view, request.method if request is not None else "GET")


@dataclass(frozen=True)
class OperationAccess:
    """What one API operation asks of its caller."""

    method: str
    path: str  # as the schema writes it: /api/v1/jobs/{id}/cancel/
    scopes: tuple[str, ...]
    permissions: tuple[str, ...] | None


@functools.cache
def operation_access() -> tuple[OperationAccess, ...]:
    """Every API operation with its scopes and permissions, read from the views themselves (the
    URL configuration drf-spectacular documents), in path and method order."""
    from drf_spectacular.generators import EndpointEnumerator

    found = []
    for path, _regex, method, callback in EndpointEnumerator().get_api_endpoints():
        if not path.startswith("/api/v1/"):
            continue
        view = callback.cls(**getattr(callback, "initkwargs", {}))
        permissions = view_permissions(view, method)
        found.append(
            OperationAccess(
                method=method,
                path=path,
                scopes=tuple(view_scopes(view, method)),
                permissions=None if permissions is None else tuple(permissions),
            )
        )
    return tuple(sorted(found, key=lambda o: (o.path, o.method)))


#: Scopes of endpoints outside the API (e.g. `fleet:metrics`), with what their permission set is.
_outside_api: dict[str, Callable[[], tuple[str, ...]]] = {}


def register_scope_needs(scope: str, permissions: Callable[[], tuple[str, ...]]) -> None:
    """Declare a scope an endpoint outside `/api/v1/` checks, and the permissions it needs."""
    _outside_api[scope] = permissions


def scope_needs(scope: str) -> list[tuple[str, ...]]:
    """The permission sets of the operations `scope` opens (one per distinct set)."""
    found = {o.permissions for o in operation_access() if scope in o.scopes and o.permissions is not None}
    if scope in _outside_api:
        found.add(_outside_api[scope]())
    return sorted(found)


def scope_usable(scope: str, user: Any) -> bool:
    """Whether `user` could use `scope` for at least one operation (a scope no operation needs
    with a permission set of its own is usable by nobody's automation)."""
    return any(user.has_perms(needed) for needed in scope_needs(scope))
