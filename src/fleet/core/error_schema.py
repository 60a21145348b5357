"""The spec's uniform error components, as literal OpenAPI (they are not serializer-shaped in the
spec: `required` precedes `properties` and is not sorted), appended to every generated schema.

Imported by the settings module, so it imports nothing that needs configured settings."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """The spec's `ErrorCodeEnum`, in its order: the one list of error codes."""

    ERROR = "error"
    INVALID = "invalid"
    PARSE_ERROR = "parse_error"
    AUTHENTICATION_FAILED = "authentication_failed"
    NOT_AUTHENTICATED = "not_authenticated"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    CONFLICT = "conflict"
    ENROLLMENT_INFRASTRUCTURE_REFERENCE_PENDING = "enrollment_infrastructure_reference_pending"
    ENROLLMENT_INFRASTRUCTURE_REFERENCE_CHANGED = "enrollment_infrastructure_reference_changed"
    UNPROCESSABLE_ENTITY = "unprocessable_entity"
    THROTTLED = "throttled"
    SERVICE_UNAVAILABLE = "service_unavailable"


ERROR_COMPONENTS = {
    "ErrorResponse": {
        "type": "object",
        "description": (
            "Uniform error body for every 4xx/5xx response. `detail` is a human-readable message, "
            "always present, safe to display to end users. `code` is the machine-readable "
            "identifier. `field_errors` lists per-input-field validation messages and is empty "
            "for non-field errors (auth, permission, not-found, conflict, server)."
        ),
        "required": ["detail", "code", "field_errors"],
        "properties": {
            "detail": {"type": "string"},
            "code": {"$ref": "#/components/schemas/ErrorCodeEnum"},
            "field_errors": {"type": "array", "items": {"$ref": "#/components/schemas/FieldError"}},
        },
    },
    "ErrorCodeEnum": {
        "type": "string",
        "description": (
            "Stable machine-readable error identifier. New members may be added within this API "
            "version; clients must tolerate unknown values."
        ),
        "enum": [code.value for code in ErrorCode],
    },
    "FieldError": {
        "type": "object",
        "description": "One input field's validation messages.",
        "required": ["field", "messages"],
        "properties": {
            "field": {
                "type": "string",
                "description": (
                    "Dotted path to the offending input field, or to the collection row when the "
                    "whole row is invalid (e.g. `filters.end_date`, `memberships.0.role`, "
                    "`memberships.0`)."
                ),
            },
            "messages": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        },
    },
}

#: Response descriptions the spec uses for each error status.
ERROR_DESCRIPTIONS = {
    400: "Validation error.",
    401: "Authentication credentials were not provided or are invalid.",
    403: "You do not have permission to perform this action.",
    404: "Not found.",
    409: "Conflict with the current state.",
}
