from django.urls import path

from fleet.burnin.api import (
    certificate_views,
    diagnosis_views,
    evidence_views,
    fingerprint_views,
    rerun_views,
    views,
)

urlpatterns = [
    path(
        "satellites/resource-classes/",
        views.SatelliteResourceClassesView.as_view(),
        name="satellite-resource-classes",
    ),
    path(
        "satellites/fingerprints/", fingerprint_views.SatelliteFingerprintsView.as_view(), name="satellite-fingerprints"
    ),
    path("burn-in/executions/<uuid:execution_id>/", views.TestExecutionView.as_view(), name="execution"),
    path("burn-in/evaluations/pending/", views.PendingEvaluationsView.as_view(), name="evaluations-pending"),
    path("burn-in/evaluations/results/", views.EvaluationResultsUpsertView.as_view(), name="evaluations-results"),
    path("burn-in/policy-progress/", views.PolicyProgressListView.as_view(), name="progress-list"),
    path(
        "burn-in/sites/<uuid:site_id>/progress-summary/", views.ProgressSummaryView.as_view(), name="progress-summary"
    ),
    path("burn-in/sites/<uuid:site_id>/rerun-plans/", rerun_views.RerunPlanPreviewView.as_view(), name="rerun-preview"),
    path(
        "burn-in/sites/<uuid:site_id>/rerun-plans/dispatch/",
        rerun_views.RerunPlanDispatchView.as_view(),
        name="rerun-dispatch",
    ),
    path("burn-in/policy-progress/reconcile/", views.PolicyProgressReconcileView.as_view(), name="progress-reconcile"),
    path(
        "devices/<uuid:device_id>/certificate/",
        certificate_views.DeviceCertificateView.as_view(),
        name="device-certificate",
    ),
    path(
        "devices/<uuid:device_id>/certificates/",
        certificate_views.DeviceCertificatesView.as_view(),
        name="device-certificates",
    ),
    path(
        "devices/<uuid:device_id>/fingerprints/",
        fingerprint_views.DeviceFingerprintsView.as_view(),
        name="device-fingerprints",
    ),
    path("devices/<uuid:device_id>/accept/", certificate_views.DeviceAcceptView.as_view(), name="device-accept"),
    path("certificates/keys/", certificate_views.CertificateKeysView.as_view(), name="certificate-keys"),
    path(
        "devices/<uuid:device_id>/evidence-pack/",
        evidence_views.DeviceEvidencePackView.as_view(),
        name="device-evidence-pack",
    ),
]

# --- diagnosis ------------------------------------------------------------------------------------
urlpatterns += [
    path("burn-in/sites/<uuid:site_id>/outliers/", diagnosis_views.SiteOutliersView.as_view(), name="site-outliers"),
    path(
        "burn-in/sites/<uuid:site_id>/isolation-plans/",
        diagnosis_views.IsolationPlanPreviewView.as_view(),
        name="isolation-preview",
    ),
    path(
        "burn-in/sites/<uuid:site_id>/isolation-plans/dispatch/",
        diagnosis_views.IsolationPlanDispatchView.as_view(),
        name="isolation-dispatch",
    ),
    path(
        "burn-in/sites/<uuid:site_id>/isolation-plans/<uuid:plan_id>/",
        diagnosis_views.IsolationPlanView.as_view(),
        name="isolation-plan",
    ),
    path(
        "burn-in/sites/<uuid:site_id>/isolation-plans/<uuid:plan_id>/advance/",
        diagnosis_views.IsolationPlanAdvanceView.as_view(),
        name="isolation-advance",
    ),
    path("burn-in/sites/<uuid:site_id>/diagnoses/", diagnosis_views.SiteDiagnosesView.as_view(), name="diagnoses"),
    path("burn-in/sites/<uuid:site_id>/attempts/", diagnosis_views.TargetAttemptsView.as_view(), name="attempts"),
]
