from django.urls import path

from fleet.events.api import views

urlpatterns = [
    path("webhooks/subscriptions/", views.SubscriptionsView.as_view(), name="webhook-subscriptions"),
    path(
        "webhooks/subscriptions/<uuid:subscription_id>/", views.SubscriptionView.as_view(), name="webhook-subscription"
    ),
    path(
        "webhooks/subscriptions/<uuid:subscription_id>/deliveries/",
        views.DeliveriesView.as_view(),
        name="webhook-deliveries",
    ),
    path(
        "webhooks/subscriptions/<uuid:subscription_id>/redeliver/",
        views.RedeliverView.as_view(),
        name="webhook-redeliver",
    ),
]
