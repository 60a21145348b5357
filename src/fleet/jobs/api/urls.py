from rest_framework.routers import SimpleRouter

from fleet.jobs.api.views import JobViewSet

router = SimpleRouter()
router.register("jobs", JobViewSet)

urlpatterns = router.urls
