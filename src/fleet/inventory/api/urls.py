from django.urls import path
from rest_framework.routers import SimpleRouter

from fleet.inventory.api import views

router = SimpleRouter(use_regex_path=False)  # path converters: a malformed uuid is a 404
router.register("sites", views.SiteViewSet)
router.register("satellites", views.SatelliteViewSet)
router.register("topologies", views.TopologyViewSet)
router.register("devices", views.DeviceViewSet)

urlpatterns = [
    path("auth/whoami/", views.WhoAmIView.as_view(), name="whoami"),
    path("satellites/heartbeat/", views.SatelliteHeartbeatView.as_view(), name="satellite-heartbeat"),
    *router.urls,
]
