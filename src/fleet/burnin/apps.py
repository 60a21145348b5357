from django.apps import AppConfig


class BurninConfig(AppConfig):
    name = "fleet.burnin"
    label = "burnin"
    verbose_name = "Burn-in results"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from fleet.burnin.certificates.acceptance import GATE
        from fleet.burnin.executions import executions_abandon
        from fleet.burnin.metrics import projection_gauges
        from fleet.burnin.remedies import remedies_dispatch
        from fleet.burnin.repair_due import requirements_passed
        from fleet.core.metrics import register_scrape_collector
        from fleet.jobs.services import on_jobs_ended
        from fleet.lifecycle.breakers import requirement_passes_set
        from fleet.lifecycle.services import acceptance_gate_set

        # Jobs sit below burn-in: ending one (finish, cancel, expired lease) closes the
        # executions it left running through this subscription, never by jobs importing us.
        on_jobs_ended(executions_abandon)
        # ... and gives a remediation step the job that saw the events asked for its own job (docs/remediation.md).
        on_jobs_ended(remedies_dispatch)
        # The lifecycle sits below burn-in too: a move into an accepted state asks certificates
        # through this gate (docs/lifecycle.md).
        acceptance_gate_set(GATE)
        # and the breaker asks which requirements a scope has passed (a suspect requirement).
        requirement_passes_set(requirements_passed)
        # /metrics reads the projection at scrape time (fleet.core.metrics knows no app).
        register_scrape_collector(
            "burnin", projection_gauges, permissions=("burnin.view_policyprogress", "inventory.view_satellite")
        )
