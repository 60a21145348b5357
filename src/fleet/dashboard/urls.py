"""The dashboard's URLs: operators bookmark them, so they stay as they are (docs/dashboard.md)."""

from django.urls import path

from fleet.dashboard import actions, autopilot_views, lifecycle_views, views, webhook_views

app_name = "dashboard"

urlpatterns = [
    path("", views.Overview.as_view(), name="overview"),
    path("sites/<slug:slug>/", views.SitePage.as_view(), name="site"),
    path("sites/<slug:slug>/grid/", views.GridPage.as_view(), name="grid"),
    path("sites/<slug:slug>/failures/", views.FailuresPage.as_view(), name="failures"),
    path("sites/<slug:slug>/repairs/", lifecycle_views.RepairQueuePage.as_view(), name="repairs"),
    path(
        "sites/<slug:slug>/devices/<str:hostname>/repair/", lifecycle_views.RecordRepair.as_view(), name="repair-form"
    ),
    path(
        "sites/<slug:slug>/breakers/<str:resource_class>/reset/",
        lifecycle_views.ResetBreaker.as_view(),
        name="breaker-reset",
    ),
    path("sites/<slug:slug>/autopilot/", autopilot_views.AutopilotPage.as_view(), name="autopilot"),
    path("sites/<slug:slug>/autopilot/pause/", autopilot_views.PauseAutopilot.as_view(), name="autopilot-pause"),
    path("sites/<slug:slug>/autopilot/resume/", autopilot_views.ResumeAutopilot.as_view(), name="autopilot-resume"),
    path("sites/<slug:slug>/failures.csv", views.FailuresCsv.as_view(), name="failures-csv"),
    path("sites/<slug:slug>/devices/<str:hostname>/", views.DevicePage.as_view(), name="device"),
    path(
        "sites/<slug:slug>/devices/<str:hostname>/certificate/",
        views.CertificatePrint.as_view(),
        name="device-certificate",
    ),
    path("sites/<slug:slug>/metrics/<str:requirement>/", views.MetricsPage.as_view(), name="metrics"),
    path("sites/<slug:slug>/reruns/preview/", actions.RerunPreview.as_view(), name="rerun-preview"),
    path("sites/<slug:slug>/reruns/preview/<uuid:token>/", actions.RerunPreview.as_view(), name="rerun-previewed"),
    path("sites/<slug:slug>/reruns/dispatch/", actions.RerunDispatch.as_view(), name="rerun-dispatch"),
    path("sites/<slug:slug>/reruns/<uuid:token>/", actions.RerunResult.as_view(), name="rerun-result"),
    path("sites/<slug:slug>/isolation/preview/", actions.IsolationPreview.as_view(), name="isolation-preview"),
    path("sites/<slug:slug>/isolation/dispatch/", actions.IsolationDispatch.as_view(), name="isolation-dispatch"),
    path("sites/<slug:slug>/isolation/wait/", actions.IsolationWait.as_view(), name="isolation-wait"),
    path("sites/<slug:slug>/isolation/<uuid:plan_id>/", actions.IsolationPlanPage.as_view(), name="isolation"),
    path(
        "sites/<slug:slug>/isolation/<uuid:plan_id>/advance/",
        actions.IsolationAdvance.as_view(),
        name="isolation-advance",
    ),
    path("executions/<uuid:execution_id>/", views.ExecutionPage.as_view(), name="execution"),
    path("what-if/", views.WhatIfPage.as_view(), name="what-if"),
    path("jobs/", views.JobsPage.as_view(), name="jobs"),
    path("webhooks/", webhook_views.SubscriptionsPage.as_view(), name="webhooks"),
    path("webhooks/<slug:name>/", webhook_views.SubscriptionPage.as_view(), name="webhook"),
    path("webhooks/<slug:name>/redeliver/", webhook_views.Redeliver.as_view(), name="webhook-redeliver"),
    path("jobs/<uuid:job_id>/", views.JobPage.as_view(), name="job"),
    path("jobs/<uuid:job_id>/cancel/", actions.CancelJob.as_view(), name="job-cancel"),
]
