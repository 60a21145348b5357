"""Who am I: lets an operator or an agent check its credentials before doing real work."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.principals import ClientPrincipal, actor_label


class WhoAmIResponseSerializer(serializers.Serializer):
    principal = serializers.CharField(help_text="`client:<name>` for OAuth2 clients, `user:<name>` for people.")
    kind = serializers.ChoiceField(choices=["client", "user"])
    scopes = serializers.ListField(child=serializers.CharField(), help_text="Token scopes (bearer only).")
    site_slug = serializers.CharField(allow_null=True, help_text="The only site this caller may act on.")
    satellite_name = serializers.CharField(allow_null=True)


class WhoAmIView(APIView):
    required_scopes = ["fleet:read"]

    @extend_schema(
        operation_id="api_v1_auth_whoami_retrieve",
        tags=["Auth"],
        summary="Describe the caller",
        responses={200: WhoAmIResponseSerializer},
    )
    def get(self, request: Request) -> Response:
        user = request.user
        satellite = user.satellite if isinstance(user, ClientPrincipal) else None
        return Response(
            WhoAmIResponseSerializer(
                {
                    "principal": actor_label(user),
                    "kind": "client" if isinstance(user, ClientPrincipal) else "user",
                    "scopes": sorted(request.auth.scopes) if hasattr(request.auth, "scope") else [],
                    "site_slug": satellite.site.slug if satellite else None,
                    "satellite_name": satellite.name if satellite else None,
                }
            ).data
        )
