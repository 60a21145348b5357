import django_filters
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.error_schema import ERROR_DESCRIPTIONS
from fleet.core.principals import ensure_site_allowed
from fleet.core.requests import validated
from fleet.inventory.models import Site
from fleet.policies.api import serializers
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from fleet.policies.resolution import load_resolutions


class PolicyFilter(django_filters.FilterSet):
    class Meta:
        model = AcceptancePolicy
        fields = ["resource_class"]


@extend_schema_view(list=extend_schema(tags=["Policies"]), retrieve=extend_schema(tags=["Policies"]))
class AcceptancePolicyViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = AcceptancePolicy.objects.prefetch_related(
        Prefetch(
            "requirements",
            queryset=Requirement.objects.order_by("name").prefetch_related(
                Prefetch(
                    "thresholds", queryset=ThresholdRule.objects.select_related("site").order_by("metric", "statistic")
                )
            ),
        )
    )
    serializer_class = serializers.AcceptancePolicySerializer
    filterset_class = PolicyFilter
    required_scopes = ["fleet:read"]
    lookup_value_converter = "uuid"


class ParameterProfileFilter(django_filters.FilterSet):
    class Meta:
        model = ParameterProfile
        fields = ["resource_class", "test"]


@extend_schema_view(list=extend_schema(tags=["Policies"]), retrieve=extend_schema(tags=["Policies"]))
class ParameterProfileViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = ParameterProfile.objects.all()
    serializer_class = serializers.ParameterProfileSerializer
    filterset_class = ParameterProfileFilter
    required_scopes = ["fleet:read"]
    lookup_value_converter = "uuid"


class ResolvedThresholdsView(APIView):
    """The thresholds that judge a requirement's executions at a site, and their source key."""

    required_scopes = ["fleet:read"]
    error_responses = {status: ERROR_DESCRIPTIONS[status] for status in (400, 401, 403, 404)}

    @extend_schema(
        operation_id="api_v1_policies_resolved_thresholds_retrieve",
        tags=["Policies"],
        summary="Resolve a requirement's thresholds for a site",
        parameters=[
            OpenApiParameter("requirement", OpenApiTypes.UUID, required=True, description="Requirement id."),
            OpenApiParameter("site", OpenApiTypes.UUID, required=True, description="Site id."),
        ],
        responses={200: serializers.ResolvedThresholdsSerializer},
    )
    def get(self, request: Request) -> Response:
        query = validated(serializers.ResolvedThresholdsQuerySerializer, request, data=request.query_params)
        requirement = get_object_or_404(Requirement.objects.select_related("policy"), id=query["requirement"])
        site = get_object_or_404(Site, id=query["site"])
        ensure_site_allowed(request.user, site.id)
        resolution = load_resolutions([(requirement.id, site.id)])[(requirement.id, site.id)]
        return Response(
            serializers.ResolvedThresholdsSerializer(
                {
                    "requirement_id": requirement.id,
                    "requirement_name": requirement.name,
                    "site_id": site.id,
                    "policy_version": requirement.policy.version,
                    "rules": resolution.rules_list,
                    "canonical_json": resolution.canonical.decode(),
                    "evaluation_source_key": resolution.key,
                }
            ).data
        )
