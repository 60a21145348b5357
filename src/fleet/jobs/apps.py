from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "fleet.jobs"
    label = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from fleet.core.metrics import register_scrape_collector
        from fleet.jobs.metrics import job_gauges

        register_scrape_collector("jobs", job_gauges, permissions=("jobs.view_job",))
