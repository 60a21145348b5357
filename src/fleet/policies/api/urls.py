from django.urls import path
from rest_framework.routers import SimpleRouter

from fleet.policies.api import views

router = SimpleRouter()
router.register("policies", views.AcceptancePolicyViewSet)
router.register("parameter-profiles", views.ParameterProfileViewSet)

urlpatterns = [
    path("policies/resolved-thresholds/", views.ResolvedThresholdsView.as_view(), name="resolved-thresholds"),
    *router.urls,
]
