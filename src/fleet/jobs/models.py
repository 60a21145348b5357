"""Jobs: the only way burn-in work reaches a satellite, and the device leases that keep two jobs
off one device."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from fleet.core.models import TimeStamped, choices_check, new_uuid
from fleet_rules.vocabulary import ACTIVE_JOB_STATUSES, JobReason, JobStatus, Mover, PersonAction, WorkflowName


class Job(TimeStamped):
    """A unit of burn-in work for one satellite: one device (single-node) or one topology cohort
    (multi-node). `parameters` holds the requirements to run, their parameters and the policy
    version they were planned under."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    site = models.ForeignKey("inventory.Site", on_delete=models.PROTECT, related_name="jobs")
    satellite = models.ForeignKey("inventory.Satellite", on_delete=models.PROTECT, related_name="jobs")
    workflow_name = models.CharField(max_length=64, choices=WorkflowName.choices)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    topology = models.ForeignKey(
        "inventory.Topology", on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )
    parameters = models.JSONField(default=dict, blank=True)
    requested_by = models.CharField(max_length=200, default=Mover.SYSTEM.value)
    reason = models.CharField(max_length=32, default=JobReason.DISPATCH, help_text="dispatch, rerun or manual.")
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            choices_check("status", JobStatus, "jobs_job_status_valid"),
            choices_check("workflow_name", WorkflowName, "jobs_job_workflow_valid"),
            models.CheckConstraint(
                condition=(
                    Q(workflow_name=WorkflowName.MULTI_NODE_COLLECTIVE, topology__isnull=False)
                    | Q(workflow_name=WorkflowName.SINGLE_NODE, topology__isnull=True)
                ),
                name="jobs_job_topology_iff_multi_node",
            ),
        ]
        indexes = [
            models.Index(fields=["satellite", "status", "created_at"], name="jobs_job_claim_idx"),
            models.Index(fields=["status", "lease_expires_at"], name="jobs_job_lease_idx"),
            models.Index(fields=["site", "status"], name="jobs_job_site_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name} {self.id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_JOB_STATUSES

    @property
    def requirement_names(self) -> list[str]:
        return self.requirement_names_of(self.parameters)

    @staticmethod
    def requirement_names_of(parameters: dict | None) -> list[str]:
        """The requirements a job's `parameters` carry (for reads that fetch the column alone)."""
        return [r["name"] for r in (parameters or {}).get("requirements", [])]


#: The partial unique index that keeps two active jobs off one device (its name is how a refused
#: insert is told apart from other constraint failures).
ONE_ACTIVE_JOB_PER_DEVICE = "jobs_one_active_job_per_device"


class JobDevice(models.Model):
    """A device held by a job. While `active`, no other job may hold the device: a partial
    unique index makes that a database fact."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="job_devices")
    device = models.ForeignKey("inventory.Device", on_delete=models.PROTECT, related_name="job_devices")
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["job", "device"]
        constraints = [
            models.UniqueConstraint(fields=["job", "device"], name="jobs_jobdevice_unique"),
            models.UniqueConstraint(fields=["device"], condition=Q(active=True), name=ONE_ACTIVE_JOB_PER_DEVICE),
        ]

    def __str__(self) -> str:
        return f"{self.device_id} in {self.job_id}{' (active)' if self.active else ''}"


class ActionReceipt(models.Model):
    """A person's state-changing action (rerun dispatch, job cancel, culprit isolation), recorded
    under the one-time token its preview carried, in the transaction that acted: a reloaded or
    replayed POST finds it and is sent to the first result (`location`); two POSTs racing with one
    token serialise on the primary key, so exactly one acts (`fleet.jobs.receipts`)."""

    token = models.UUIDField(primary_key=True, editable=False)
    action = models.CharField(max_length=32, choices=PersonAction.choices)
    subject = models.CharField(max_length=200, help_text="What it acted on: `site <slug>`, `job <id>`.")
    location = models.CharField(max_length=500, help_text="The result's page (a GET).")
    result = models.JSONField(default=dict, blank=True, help_text="What the result page shows.")
    requested_by = models.CharField(max_length=200)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "token"]
        constraints = [choices_check("action", PersonAction, "jobs_actionreceipt_action_valid")]

    def __str__(self) -> str:
        return f"{self.action} {self.subject} ({self.token})"
