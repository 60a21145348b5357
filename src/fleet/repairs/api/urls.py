from django.urls import path

from fleet.repairs.api import views

urlpatterns = [
    path("devices/<uuid:device_id>/repairs/", views.DeviceRepairsView.as_view(), name="device-repairs"),
    path("burn-in/sites/<uuid:site_id>/repair-queue/", views.RepairQueueView.as_view(), name="repair-queue"),
    path("burn-in/sites/<uuid:site_id>/breakers/", views.BreakersView.as_view(), name="breakers"),
    path(
        "burn-in/sites/<uuid:site_id>/breakers/<str:resource_class>/reset/",
        views.BreakerResetView.as_view(),
        name="breaker-reset",
    ),
]
