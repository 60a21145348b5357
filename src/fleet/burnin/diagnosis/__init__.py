"""Diagnosis: what the stored evidence says beyond pass and fail — fleet-relative outliers,
attempt history (passes after failures), and culprit isolation for a failed rack cohort."""
