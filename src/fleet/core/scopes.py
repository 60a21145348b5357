"""Which clients may act, and with which scopes. Fail closed: a client is either bound to a live
satellite (the satellite scopes, nothing more) or owned by an active user (an operator's
automation client: every scope); any other client, e.g. one whose satellite was deleted, gets none."""

from __future__ import annotations

from oauth2_provider.scopes import SettingsScopes

#: What a satellite's agent needs; operators' own clients may also hold `job:create`.
SATELLITE_SCOPES = [
    "fleet:read",
    "test-execution:report",
    "test-execution:evaluate",
    "burn-in-policy-progress:write",
    "job:run",
]

SATELLITE, OPERATOR = "satellite", "operator"


def client_kind(application) -> str | None:
    from fleet.inventory.models import SatelliteCredential

    if SatelliteCredential.objects.filter(application_id=application.pk).exists():
        return SATELLITE
    if application.user_id is not None and application.user.is_active:
        return OPERATOR
    return None


class ClientScopes(SettingsScopes):
    def get_available_scopes(self, application=None, request=None, *args, **kwargs):
        scopes = super().get_available_scopes(application, request, *args, **kwargs)
        if application is None:
            return scopes
        kind = client_kind(application)
        if kind == SATELLITE:
            return [s for s in scopes if s in SATELLITE_SCOPES]
        return scopes if kind == OPERATOR else []

    def get_default_scopes(self, application=None, request=None, *args, **kwargs):
        if application is not None and client_kind(application) == SATELLITE:
            return list(SATELLITE_SCOPES)
        return super().get_default_scopes(application, request, *args, **kwargs)
