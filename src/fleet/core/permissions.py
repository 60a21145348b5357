"""One permission class for every API view: OAuth2 scopes for bearer tokens, Django model
permissions for session users.

Views declare `required_scopes` and `required_permissions`, either as a list or as a dict keyed
by HTTP method (`"GET"`, `"POST"`, or `"*"` for the rest).
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.contrib.rest_framework import TokenHasScope


def _for_method(value: Any, method: str) -> list[str]:
    if isinstance(value, dict):
        value = value.get(method, value.get("*", []))
    return list(value or [])


class ScopeOrModelPermission(TokenHasScope):
    def has_permission(self, request, view) -> bool:
        if hasattr(request.auth, "scope"):
            return super().has_permission(request, view)
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return user.has_perms(_for_method(getattr(view, "required_permissions", []), request.method))

    def get_scopes(self, request, view) -> list[str]:
        method = request.method if request is not None else "GET"
        return _for_method(getattr(view, "required_scopes", []), method)
