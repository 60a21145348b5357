"""Local passwords: on for everyone, for break-glass admins only (superusers), or off
(`FLEET_PASSWORD_LOGIN` = `on` | `admins` | `off`; with OpenID Connect configured the default is
`admins`). People otherwise sign in through the company's identity provider (`fleet.access.oidc`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend

PASSWORD_LOGIN_MODES = ("on", "admins", "off")


def password_login_mode() -> str:
    mode = str(getattr(settings, "FLEET_PASSWORD_LOGIN", "on"))
    return mode if mode in PASSWORD_LOGIN_MODES else "off"


class LocalPasswordBackend(ModelBackend):
    """Django's own backend (permissions included), with the password sign-in policy applied:
    a refused person gets the same answer as a wrong password (nothing to probe)."""

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any):
        mode = password_login_mode()
        if mode == "off":
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and mode == "admins" and not user.is_superuser:
            return None
        return user
