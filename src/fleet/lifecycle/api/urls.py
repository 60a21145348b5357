from django.urls import path

from fleet.lifecycle.api import views

urlpatterns = [
    path("satellites/node-states/", views.SatelliteNodeStatesView.as_view(), name="satellite-node-states"),
    path("devices/<uuid:device_id>/history/", views.DeviceHistoryView.as_view(), name="device-history"),
    path("devices/<uuid:device_id>/transitions/", views.DeviceTransitionView.as_view(), name="device-transitions"),
]
