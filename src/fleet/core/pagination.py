"""Keyset pagination for every list endpoint: bounded pages, constant queries per page."""

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class FleetCursorPagination(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 500
    ordering: tuple[str, ...] = ("created_at", "id")

    def decode_cursor(self, request):
        """A cursor that was not issued by us is a bad parameter (400 on `cursor`), not a 404."""
        try:
            return super().decode_cursor(request)
        except NotFound as exc:
            raise ValidationError({self.cursor_query_param: [str(exc.detail)]}) from exc
