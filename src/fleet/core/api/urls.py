from django.urls import path

from fleet.core.api.views import WhoAmIView

urlpatterns = [
    path("auth/whoami/", WhoAmIView.as_view(), name="whoami"),
]
