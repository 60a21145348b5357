"""Read views confined to the caller's site: a satellite-bound client sees only its own site's rows.

Kept apart from `identity` because DRF's view classes read the authentication settings when
imported, and the authentication class itself imports `identity`."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import viewsets
from rest_framework.request import Request

from fleet.inventory.identity import restrict


class SiteScopedQuerysetMixin:
    """Rows that belong to a site: a satellite-bound client sees only its own site's rows
    (`site_lookup` names the path to the row's site id)."""

    site_lookup = "site_id"

    def get_queryset(self) -> QuerySet[Any]:
        queryset: QuerySet[Any] = super().get_queryset()  # type: ignore[misc]
        request: Request = self.request  # type: ignore[attr-defined]
        return restrict(queryset, request.user, site_lookup=self.site_lookup)


class SiteScopedReadViewSet(SiteScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    required_scopes: list[str] | dict[str, list[str]] = ["fleet:read"]
    required_permissions: list[str] | dict[str, list[str]]
    lookup_value_converter = "uuid"  # with routers that use path converters: a malformed id is a 404
