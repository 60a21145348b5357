from django.urls import path
from rest_framework.routers import SimpleRouter

from fleet.policies.api import views

router = SimpleRouter(use_regex_path=False)  # path converters: a malformed uuid is a 404
router.register("policies", views.AcceptancePolicyViewSet)
router.register("parameter-profiles", views.ParameterProfileViewSet)

urlpatterns = [
    path("policies/resolved-thresholds/", views.ResolvedThresholdsView.as_view(), name="resolved-thresholds"),
    *router.urls,
]
