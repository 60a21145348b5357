from django.urls import path
from rest_framework.routers import SimpleRouter

from fleet.core.api.views import WhoAmIView
from fleet.inventory.api import views as inventory
from fleet.jobs.api.views import JobViewSet
from fleet.policies.api import views as policies

router = SimpleRouter()
router.register("sites", inventory.SiteViewSet)
router.register("satellites", inventory.SatelliteViewSet)
router.register("topologies", inventory.TopologyViewSet)
router.register("devices", inventory.DeviceViewSet)
router.register("policies", policies.AcceptancePolicyViewSet)
router.register("parameter-profiles", policies.ParameterProfileViewSet)
router.register("jobs", JobViewSet)

urlpatterns = [
    path("auth/whoami/", WhoAmIView.as_view(), name="whoami"),
    path("satellites/heartbeat/", inventory.SatelliteHeartbeatView.as_view(), name="satellite-heartbeat"),
    path(
        "satellites/resource-classes/",
        inventory.SatelliteResourceClassesView.as_view(),
        name="satellite-resource-classes",
    ),
    path("policies/resolved-thresholds/", policies.ResolvedThresholdsView.as_view(), name="resolved-thresholds"),
    *router.urls,
]
