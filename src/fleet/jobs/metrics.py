"""Jobs' metrics, read at scrape time: `fleet_jobs{site,status}` in one grouped query."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from fleet.jobs.models import Job


def job_gauges() -> Iterable[Metric]:
    jobs = GaugeMetricFamily("fleet_jobs", "Jobs by site and status.", labels=["site", "status"])
    for site, status, n in Job.objects.values_list("site__slug", "status").annotate(n=Count("id")).order_by():
        jobs.add_metric([site, status], n)
    return [jobs]
