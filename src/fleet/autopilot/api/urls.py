from django.urls import path

from fleet.autopilot.api import views

urlpatterns = [
    path("burn-in/sites/<uuid:site_id>/autopilot/", views.SiteAutopilotLogView.as_view(), name="site-autopilot"),
]
