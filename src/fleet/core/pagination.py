"""Keyset pagination for every list endpoint: bounded pages, constant queries per page."""

from rest_framework.pagination import CursorPagination


class FleetCursorPagination(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 500
    ordering = ("created_at", "id")
