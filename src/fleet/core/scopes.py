"""Which scopes a client may ask for: satellites get the satellite scopes, nothing more."""

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


class ClientScopes(SettingsScopes):
    def get_available_scopes(self, application=None, request=None, *args, **kwargs):
        scopes = super().get_available_scopes(application, request, *args, **kwargs)
        if application is not None and _is_satellite_client(application):
            return [s for s in scopes if s in SATELLITE_SCOPES]
        return scopes

    def get_default_scopes(self, application=None, request=None, *args, **kwargs):
        if application is not None and _is_satellite_client(application):
            return list(SATELLITE_SCOPES)
        return super().get_default_scopes(application, request, *args, **kwargs)


def _is_satellite_client(application) -> bool:
    from fleet.inventory.models import SatelliteCredential

    return SatelliteCredential.objects.filter(application_id=application.pk).exists()
