from django.urls import path

from fleet.lifecycle.api import views

urlpatterns = [
    path("devices/<uuid:device_id>/history/", views.DeviceHistoryView.as_view(), name="device-history"),
]
