import django_filters
from django.db.models import Prefetch, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.requests import validated
from fleet.core.schema import error_responses, read_only_operations
from fleet.inventory.identity import restrict
from fleet.policies.api import serializers
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from fleet.policies.selectors import resolved_thresholds

TAGS = ["Policies"]


class PolicyFilter(django_filters.FilterSet):
    class Meta:
        model = AcceptancePolicy
        fields = ["resource_class"]


@extend_schema_view(**read_only_operations(serializers.AcceptancePolicySerializer, tags=TAGS))
class AcceptancePolicyViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = AcceptancePolicy.objects.all()
    serializer_class = serializers.AcceptancePolicySerializer
    filterset_class = PolicyFilter
    required_scopes = ["fleet:read"]
    required_permissions = ["policies.view_acceptancepolicy"]
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[AcceptancePolicy]:
        """Policies with their requirements and thresholds; a satellite's client sees the default
        rules and its own site's overrides, never another site's."""
        thresholds = restrict(
            ThresholdRule.objects.select_related("site").order_by("metric", "statistic"), self.request.user, shared=True
        )
        requirements = Requirement.objects.order_by("name").prefetch_related(
            Prefetch("thresholds", queryset=thresholds)
        )
        return AcceptancePolicy.objects.prefetch_related(Prefetch("requirements", queryset=requirements))


class ParameterProfileFilter(django_filters.FilterSet):
    class Meta:
        model = ParameterProfile
        fields = ["resource_class", "test"]


@extend_schema_view(**read_only_operations(serializers.ParameterProfileSerializer, tags=TAGS))
class ParameterProfileViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = ParameterProfile.objects.all()
    serializer_class = serializers.ParameterProfileSerializer
    filterset_class = ParameterProfileFilter
    required_scopes = ["fleet:read"]
    required_permissions = ["policies.view_parameterprofile"]
    lookup_value_converter = "uuid"


class ResolvedThresholdsView(APIView):
    """The thresholds that judge a requirement's executions at a site, and their source key."""

    required_scopes = ["fleet:read"]
    required_permissions = ["policies.view_acceptancepolicy"]

    @extend_schema(
        operation_id="api_v1_policies_resolved_thresholds_retrieve",
        tags=TAGS,
        summary="Resolve a requirement's thresholds for a site",
        parameters=[
            OpenApiParameter("requirement", OpenApiTypes.UUID, required=True, description="Requirement id."),
            OpenApiParameter("site", OpenApiTypes.UUID, required=True, description="Site id."),
        ],
        responses={200: serializers.ResolvedThresholdsSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request) -> Response:
        query = validated(serializers.ResolvedThresholdsQuerySerializer, request, data=request.query_params)
        resolved = resolved_thresholds(requirement_id=query["requirement"], site_id=query["site"], actor=request.user)
        return Response(serializers.ResolvedThresholdsSerializer(resolved).data)
