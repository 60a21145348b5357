"""OpenAPI generation that documents like the spec: every operation lists its error responses
with the uniform `ErrorResponse` body, and bearer auth is the `oauth2` scheme with scopes."""

from __future__ import annotations

from drf_spectacular.contrib.django_oauth_toolkit import DjangoOAuthToolkitScheme
from drf_spectacular.openapi import AutoSchema

from fleet.core.error_schema import ERROR_DESCRIPTIONS

ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def error_response(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}


class FleetAutoSchema(AutoSchema):
    """Adds 400/401/403 (and 404 for views with path parameters) unless the view lists its own
    `error_responses = {status: description}` (the spec's wording per operation)."""

    def get_error_responses(self) -> dict[int, str]:
        handler = getattr(self.view, getattr(self.view, "action", None) or "", None)
        declared = getattr(handler, "error_responses", None) or getattr(self.view, "error_responses", None)
        if isinstance(declared, dict) and self.method in declared:
            declared = declared[self.method]
        if declared is not None and not (isinstance(declared, dict) and "GET" in declared):
            return dict(declared)
        errors = {}
        takes_input = (
            self.method in ("POST", "PUT", "PATCH")
            or self._get_filter_parameters()
            or self._get_pagination_parameters()
            or any(p.get("in") == "query" for p in self._get_parameters() if isinstance(p, dict))
        )
        if takes_input:
            errors[400] = ERROR_DESCRIPTIONS[400]
        errors[401] = ERROR_DESCRIPTIONS[401]
        errors[403] = ERROR_DESCRIPTIONS[403]
        if "{" in self.path:
            errors[404] = ERROR_DESCRIPTIONS[404]
        return errors

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for status_code, description in sorted(self.get_error_responses().items()):
            responses.setdefault(str(status_code), error_response(description))
        return responses


class BearerTokenScheme(DjangoOAuthToolkitScheme):
    target_class = "fleet.core.authentication.BearerTokenAuthentication"
    name = "oauth2"
