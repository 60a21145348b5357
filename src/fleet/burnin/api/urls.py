from django.urls import path

from fleet.burnin.api import rerun_views, views

urlpatterns = [
    path("executions/<uuid:execution_id>/", views.TestExecutionView.as_view(), name="execution"),
    path("evaluations/pending/", views.PendingEvaluationsView.as_view(), name="evaluations-pending"),
    path("evaluations/results/", views.EvaluationResultsUpsertView.as_view(), name="evaluations-results"),
    path("policy-progress/", views.PolicyProgressListView.as_view(), name="progress-list"),
    path("sites/<uuid:site_id>/progress-summary/", views.ProgressSummaryView.as_view(), name="progress-summary"),
    path("sites/<uuid:site_id>/rerun-plans/", rerun_views.RerunPlanPreviewView.as_view(), name="rerun-preview"),
    path(
        "sites/<uuid:site_id>/rerun-plans/dispatch/", rerun_views.RerunPlanDispatchView.as_view(), name="rerun-dispatch"
    ),
    path("policy-progress/reconcile/", views.PolicyProgressReconcileView.as_view(), name="progress-reconcile"),
]
