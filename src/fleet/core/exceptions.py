"""Domain errors: what a service raises when a request cannot be honoured, each with an HTTP
status and a stable `ErrorCode` (the error handler turns them into `ErrorResponse` bodies).

Imports nothing from DRF's views, so any module — the authentication class included — can raise
them without importing the view machinery (which reads the authentication settings)."""

from __future__ import annotations

from rest_framework import status

from fleet.core.error_schema import ErrorCode


class FleetError(Exception):
    """A domain error with an HTTP status and a stable code (e.g. a conflict)."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    code: ErrorCode = ErrorCode.INVALID

    def __init__(self, detail: str, *, field_errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field_errors = field_errors or {}


class Conflict(FleetError):
    status_code = status.HTTP_409_CONFLICT
    code = ErrorCode.CONFLICT


class PermissionDeniedError(FleetError):
    status_code = status.HTTP_403_FORBIDDEN
    code = ErrorCode.PERMISSION_DENIED


class NotFoundError(FleetError):
    status_code = status.HTTP_404_NOT_FOUND
    code = ErrorCode.NOT_FOUND
