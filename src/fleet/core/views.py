"""Base classes shared by the API views of every app."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets

from fleet.core.principals import site_restriction


class SiteScopedQuerysetMixin:
    """Rows that belong to a site: a satellite-bound client sees only its own site's rows
    (`site_lookup` names the path to the row's site id)."""

    site_lookup = "site_id"

    def get_queryset(self) -> QuerySet:
        queryset = super().get_queryset()
        restricted = site_restriction(self.request.user)
        if restricted is not None:
            queryset = queryset.filter(**{self.site_lookup: restricted})
        return queryset


class SiteScopedReadViewSet(SiteScopedQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    required_scopes = ["fleet:read"]
    lookup_value_converter = "uuid"
