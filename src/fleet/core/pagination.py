"""Keyset pagination for every list endpoint: bounded pages, constant queries per page, and
signed cursors (an edited, truncated or borrowed cursor is a 400 on `cursor`, whatever it says)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from rest_framework.pagination import Cursor, CursorPagination, _positive_int
from rest_framework.utils.urls import replace_query_param

from fleet.core.cursors import cursor_decode, cursor_encode


class FleetCursorPagination(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 500
    ordering: tuple[str, ...] = ("created_at", "id")

    def paginate_queryset(self, queryset, request, view=None):
        # A cursor is good for the list it came from only.
        self._purpose = f"list:{request.path}"
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request) -> Cursor | None:
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        payload: dict[str, Any] = cursor_decode(encoded, purpose=self._purpose, field=self.cursor_query_param)
        position = payload.get("p")
        try:
            offset = _positive_int(str(payload.get("o", 0)), cutoff=self.offset_cutoff)
            reverse = bool(int(payload.get("r", 0)))
        except (TypeError, ValueError):
            offset, reverse = -1, False
        if offset < 0 or not (position is None or isinstance(position, str)):
            raise ValidationError({self.cursor_query_param: ["The cursor is not valid."]})
        return Cursor(offset=offset, reverse=reverse, position=position)  # type: ignore[arg-type]  # str, as DRF

    def encode_cursor(self, cursor: Cursor) -> str:
        token = cursor_encode(
            {"o": cursor.offset, "r": int(cursor.reverse), "p": cursor.position}, purpose=self._purpose
        )
        return replace_query_param(self.base_url or "", self.cursor_query_param, token)
