from rest_framework.routers import SimpleRouter

from fleet.jobs.api.views import JobViewSet

router = SimpleRouter(use_regex_path=False)  # path converters: a malformed uuid is a 404
router.register("jobs", JobViewSet)

urlpatterns = router.urls
