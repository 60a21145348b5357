"""Diagnosis endpoints: thin adapters (validate → one read or service → render)."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.burnin.api import diagnosis_serializers as s
from fleet.burnin.diagnosis.outliers import site_outliers_page
from fleet.burnin.selectors import site_get
from fleet.core.requests import validated
from fleet.core.schema import error_responses

TAGS = ["Diagnosis"]
SITE_ID = OpenApiParameter("site_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Site identifier.")


class SiteOutliersView(APIView):
    required_scopes = ["fleet:read"]
    required_permissions = ["burnin.view_policyprogress"]

    @extend_schema(
        operation_id="api_v1_burn_in_sites_outliers_list",
        tags=TAGS,
        summary="Devices that pass but are far worse than their siblings",
        description=(
            "Per (resource class, requirement, metric, statistic) at the site, over each device's latest passing "
            "evidence: the median and MAD, and the devices whose robust z-score 0.6745·(x − median)/MAD is beyond "
            "the requirement's `outlier_k` (default 3.5) on the side its comparator calls bad. Farthest out first. "
            "`groups` lists every group looked at and why one names none (too few devices, MAD 0, …)."
        ),
        parameters=[SITE_ID, s.OutliersQuerySerializer],
        responses={200: s.OutliersPageSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, site_id: UUID) -> Response:
        site = site_get(site_id=site_id, actor=request.user)
        query = validated(s.OutliersQuerySerializer, request, data=request.query_params)
        page = site_outliers_page(
            site=site,
            resource_class=query.get("resource_class"),
            requirement=query.get("requirement"),
            limit=query["limit"],
            cursor=query.get("cursor"),
        )
        return Response(s.OutliersPageSerializer(page).data)
