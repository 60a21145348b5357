"""Burn-in evidence (executions and their evaluations) and the policy-progress projection."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from fleet.core.models import choices_check, new_uuid
from fleet_rules.attempts import Outcomes
from fleet_rules.vocabulary import (
    ExecutionStatus,
    IsolationStatus,
    RemedyOutcome,
    SupersedeReason,
    Verdict,
    XidResolution,
)

SOURCE_KEY_PATTERN = r"^[0-9a-f]{64}$"


class TestExecution(models.Model):
    """One run of a test on a device (single-node) or a topology (multi-node), reported by the
    agent under an id it chose, so reporting is idempotent. `updated_at` moves on every real
    change and only then: evaluations are computed for one `updated_at`."""

    __test__ = False  # not a pytest test class despite its name

    id = models.UUIDField(primary_key=True, editable=False)
    site = models.ForeignKey("inventory.Site", on_delete=models.PROTECT, related_name="executions")
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="executions")
    requirement = models.ForeignKey("policies.Requirement", on_delete=models.PROTECT, related_name="executions")
    test = models.CharField(max_length=100)
    device = models.ForeignKey(
        "inventory.Device", on_delete=models.PROTECT, null=True, blank=True, related_name="executions"
    )
    topology = models.ForeignKey(
        "inventory.Topology", on_delete=models.PROTECT, null=True, blank=True, related_name="executions"
    )
    status = models.CharField(max_length=16, choices=ExecutionStatus.choices)
    parameters = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="", help_text="Why an errored execution could not judge.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    reported_by = models.CharField(max_length=200, default="")
    diagnostic = models.BooleanField(
        default=False,
        db_default=False,  # raw bulk inserts (the benchmark's seed) need not name it
        help_text="Run by a culprit-isolation round (its job says so): evidence for the diagnosis only, never a "
        "target's latest execution.",
    )
    #: The burn-in window's health evidence (the report's `health` object, as validated: Xid/SXid
    #: events, ECC counters before and after, throttle reasons seen); null for executions without one.
    health = models.JSONField(null=True, blank=True)
    fatal_xids = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="How many of `health`'s events the fatal Xid table (fleet_rules.xid) named when it was reported.",
    )
    fingerprint_sha256 = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        help_text="The hardware fingerprint the device reported with this execution (`FingerprintSnapshot.sha256`); "
        "null: none reported. A certificate counts a single-node pass only on the device's current fingerprint.",
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            choices_check("status", ExecutionStatus, "burnin_execution_status_valid"),
            models.CheckConstraint(
                condition=Q(health__isnull=True) | Q(device__isnull=False), name="burnin_execution_health_on_device"
            ),
            models.CheckConstraint(
                condition=Q(device__isnull=False, topology__isnull=True)
                | Q(device__isnull=True, topology__isnull=False),
                name="burnin_execution_device_xor_topology",
            ),
        ]
        indexes = [
            # "Latest execution of a target": newest first per (requirement, device|topology).
            models.Index(
                F("requirement"),
                F("device"),
                F("created_at").desc(),
                F("id").desc(),
                condition=Q(device__isnull=False),
                name="burnin_exec_latest_device_idx",
            ),
            models.Index(
                F("requirement"),
                F("topology"),
                F("created_at").desc(),
                F("id").desc(),
                condition=Q(topology__isnull=False),
                name="burnin_exec_latest_topo_idx",
            ),
            # The pending-evaluation feed pages finished executions by (updated_at, id).
            models.Index(fields=["site", "updated_at", "id"], name="burnin_exec_feed_idx"),
            models.Index(fields=["job"], name="burnin_exec_job_idx"),
            # A device's health reports, newest first (device page, evidence pack).
            models.Index(
                F("device"),
                F("created_at").desc(),
                F("id").desc(),
                condition=Q(health__isnull=False),
                name="burnin_exec_health_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.test} on {self.device or self.topology} ({self.status}, {str(self.id)[:8]})"

    @property
    def target_id(self):
        return self.device_id or self.topology_id


class EvaluationResult(models.Model):
    """The materialised evaluation of one execution, for one `execution_updated_at` and one
    threshold resolution (`evaluation_source_key`)."""

    execution = models.OneToOneField(
        TestExecution, on_delete=models.CASCADE, primary_key=True, related_name="evaluation"
    )
    passed = models.BooleanField()
    reason = models.TextField(null=True, blank=True)
    metric_evaluations = models.JSONField(default=dict, blank=True)
    evaluation_source_key = models.CharField(max_length=64)
    execution_updated_at = models.DateTimeField()
    materialised_at = models.DateTimeField()

    class Meta:
        ordering = ["-materialised_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(evaluation_source_key__regex=SOURCE_KEY_PATTERN),
                name="burnin_evaluation_source_key_format",
            ),
        ]

    def __str__(self) -> str:
        return f"{'pass' if self.passed else 'fail'}: {self.execution}"


class PolicyProgress(models.Model):
    """The projection: one row per target (requirement × device, or requirement × topology for
    rack acceptance) in a (site, satellite, resource class) scope. Written only by reconcile.

    Every index costs each written row (a first sweep of a million-target scope writes a million
    rows into indexes far larger than shared buffers), so none is kept twice: the site and the
    requirement are the leading columns of the scope-key and one-row-per-target indexes, the
    device has `burnin_progress_device_idx`."""

    # No index of its own: the scope-key and site-verdict indexes lead with it.
    site = models.ForeignKey("inventory.Site", on_delete=models.CASCADE, related_name="+", db_index=False)
    satellite = models.ForeignKey("inventory.Satellite", on_delete=models.CASCADE, related_name="+")
    resource_class = models.CharField(max_length=255)
    # No index of its own: the one-row-per-target unique index leads with it. An index on the
    # requirement alone also let the planner answer a page's key range from every row of the
    # requirement (a bitmap of the whole scope) instead of the range.
    requirement = models.ForeignKey("policies.Requirement", on_delete=models.CASCADE, related_name="+", db_index=False)
    gate = models.CharField(max_length=64)
    device = models.ForeignKey(
        "inventory.Device",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="progress",
        db_index=False,  # burnin_progress_device_idx
    )
    topology = models.ForeignKey(
        "inventory.Topology", on_delete=models.CASCADE, null=True, blank=True, related_name="progress"
    )
    target_id = models.UUIDField(help_text="The device or topology id: one row per (requirement, target).")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    execution = models.ForeignKey(TestExecution, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    evaluation_source_key = models.CharField(max_length=64, null=True, blank=True)
    policy_version = models.PositiveIntegerField()
    finished_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its execution finished, written with the row: the failures list's order, from an index.",
    )
    outcomes = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,
        help_text="The outcomes its counted attempts have had (fleet_rules.attempts.Outcomes: passed 1, failed 2, "
        "errored 4), as of the reconcile that wrote the row: flaky when more than one.",
    )
    watermark = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Freshness of the deciding evidence; a reconcile never replaces a newer watermark.",
    )
    reconciled_at = models.DateTimeField(
        help_text="When a reconcile last wrote this row (its state last changed). A sweep that finds the row "
        "unchanged leaves it alone; the scope's ReconcileSweep says when a whole sweep last confirmed it."
    )
    missing_in_sweep = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Start time of the sweep that found this row's target gone from the scope; its final page "
        "deletes the row unless the deletion guard trips. Cleared whenever the row is written.",
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["site", "satellite", "resource_class", "requirement", "target_id"]
        verbose_name_plural = "policy progress"
        constraints = [
            models.UniqueConstraint(fields=["requirement", "target_id"], name="burnin_progress_one_row_per_target"),
            choices_check("verdict", Verdict, "burnin_progress_verdict_valid"),
            models.CheckConstraint(
                condition=Q(device__isnull=False, topology__isnull=True, target_id=F("device"))
                | Q(device__isnull=True, topology__isnull=False, target_id=F("topology")),
                name="burnin_progress_target_is_device_xor_topology",
            ),
            models.CheckConstraint(condition=Q(outcomes__lte=sum(Outcomes)), name="burnin_progress_outcomes_valid"),
        ]
        indexes = [
            # A scope's rows in target order: a page's key range (its orphans) and the distinct
            # requirements of a scope are index range scans, never a scan of the scope.
            models.Index(
                fields=["site", "satellite", "resource_class", "requirement", "target_id"],
                name="burnin_progress_scope_key_idx",
            ),
            models.Index(
                fields=["site", "satellite", "resource_class", "missing_in_sweep"],
                condition=Q(missing_in_sweep__isnull=False),
                name="burnin_progress_missing_idx",
            ),
            # (site, verdict) for the pages' counts; the included columns for the outlier groups'
            # evidence mark (`fleet.burnin.diagnosis.outliers`) and the site page's counts by
            # requirement (`fleet.burnin.reads.site.TARGET_COUNTS`), each read from the index alone.
            models.Index(
                fields=["site", "verdict"],
                include=["execution", "policy_version", "requirement", "outcomes"],
                name="burnin_prog_site_verd_inc_idx",
            ),
            models.Index(fields=["device"], name="burnin_progress_device_idx"),
            # The failing rows newest finished first (the failures list's default order, and its
            # reverse): its first page is the index's first entries, not a sort of every failure.
            models.Index(
                fields=["site", "-finished_at", "-id"],
                condition=Q(verdict__in=[Verdict.FAILED, Verdict.ERRORED]),
                name="burnin_prog_failing_idx",
            ),
            # The passes that came after a failure or an error (the failures page): a minority.
            models.Index(
                fields=["site"],
                condition=Q(
                    verdict=Verdict.PASSED, outcomes__gte=Outcomes.FAILED
                ),  # `fleet_rules.attempts.not_passed_sql`
                name="burnin_prog_passed_after_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.requirement.name} · {self.device or self.topology}: {self.verdict}"


class ReconcileSweep(models.Model):
    """The last complete reconcile sweep of one scope (site, satellite, resource class, gate or
    none): when it started and finished and what it counted. This is the scope's freshness: every
    row of the scope that the sweep did not defer was confirmed between `started_at` and
    `completed_at`, whether or not it had to be written."""

    site = models.ForeignKey("inventory.Site", on_delete=models.CASCADE, related_name="+")
    satellite = models.ForeignKey("inventory.Satellite", on_delete=models.CASCADE, related_name="+")
    resource_class = models.CharField(max_length=255)
    gate = models.CharField(max_length=64, null=True, blank=True, help_text="Null: a sweep of every gate.")
    policy_version = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    completed_at = models.DateTimeField()
    target_count = models.PositiveIntegerField()
    written = models.PositiveIntegerField()
    unchanged = models.PositiveIntegerField()
    deferred = models.PositiveIntegerField()
    deleted = models.PositiveIntegerField()
    guard_tripped = models.BooleanField()

    class Meta:
        ordering = ["site", "satellite", "resource_class", "gate"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "satellite", "resource_class", "gate"],
                nulls_distinct=False,
                name="burnin_sweep_one_per_scope",
            ),
        ]

    def __str__(self) -> str:
        gate = f" / {self.gate}" if self.gate else ""
        return f"{self.resource_class}{gate}: swept {self.completed_at:%Y-%m-%d %H:%M:%S}"


class IsolationPlan(models.Model):
    """Culprit isolation for one failed rack cohort (topology × multi-node requirement): rounds of
    diagnostic collectives over subsets of the cohort, bisecting until the device(s) whose
    presence makes the collective fail are named (`fleet_rules.isolation`). `state` is the
    planner's state; `rounds` the subsets of every round with their jobs and outcomes."""

    id = models.UUIDField(primary_key=True, editable=False)
    site = models.ForeignKey("inventory.Site", on_delete=models.CASCADE, related_name="+")
    topology = models.ForeignKey("inventory.Topology", on_delete=models.CASCADE, related_name="isolation_plans")
    requirement = models.ForeignKey("policies.Requirement", on_delete=models.CASCADE, related_name="+")
    policy_version = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=IsolationStatus.choices, default=IsolationStatus.RUNNING)
    cohort = models.JSONField(help_text="Device ids of the failed cohort, sorted.")
    state = models.JSONField(help_text="The planner's state: groups of suspects, known good, culprits.")
    rounds = models.JSONField(default=list, help_text="Per round: its subsets, their jobs and outcomes.")
    max_rounds = models.PositiveSmallIntegerField()
    requested_by = models.CharField(max_length=200, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            choices_check("status", IsolationStatus, "burnin_isolation_status_valid"),
            models.UniqueConstraint(
                fields=["topology", "requirement"],
                condition=Q(status=IsolationStatus.RUNNING),
                name="burnin_isolation_one_running_per_cohort",
            ),
        ]

    def __str__(self) -> str:
        return f"isolation of {self.topology} ({self.status})"


class DeviceDiagnosis(models.Model):
    """What a diagnosis found about one device: named by an isolation plan as a device whose
    presence makes its rack's collective fail."""

    device = models.ForeignKey("inventory.Device", on_delete=models.CASCADE, related_name="diagnoses")
    plan = models.ForeignKey(IsolationPlan, on_delete=models.CASCADE, related_name="diagnoses")
    topology = models.ForeignKey("inventory.Topology", on_delete=models.CASCADE, related_name="+")
    requirement = models.ForeignKey("policies.Requirement", on_delete=models.CASCADE, related_name="+")
    finding = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "device"], name="burnin_diagnosis_one_per_plan_device"),
        ]
        indexes = [models.Index(fields=["device", "created_at"], name="burnin_diagnosis_device_idx")]

    def __str__(self) -> str:
        return f"{self.device}: {self.finding}"


class CertificateKey(models.Model):
    """A published Ed25519 public key (`fleet keys init` / `fleet keys publish`): only a published key signs. Never
    removed: after a rotation the old certificates still verify against the published keys."""

    key_id = models.CharField(
        max_length=32, primary_key=True, help_text="First 16 bytes of SHA-256 of the raw key, hex."
    )
    public_key = models.BinaryField(help_text="The 32 raw bytes of the Ed25519 public key.")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "key_id"]

    def __str__(self) -> str:
        return f"Ed25519 {self.key_id}"


class AcceptanceCertificate(models.Model):
    """A signed record of why a device was accepted: every requirement of its policy, the execution
    that decided it, its evaluation and the thresholds it was judged against (`document`, stored
    exactly as signed in `canonical`). One per device is current (`superseded_at` null); the
    others are its history, each naming why it was superseded; `previous` chains them."""

    serial = models.UUIDField(primary_key=True, editable=False)
    device = models.ForeignKey(
        "inventory.Device", on_delete=models.SET_NULL, null=True, blank=True, related_name="certificates"
    )
    site = models.ForeignKey("inventory.Site", on_delete=models.PROTECT, related_name="+")
    resource_class = models.CharField(max_length=255)
    policy_version = models.PositiveIntegerField()
    document = models.JSONField(help_text="The certificate as JSON (for queries and display).")
    canonical = models.TextField(help_text="The RFC 8785 bytes that were signed (UTF-8).")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 hex of `canonical`: the next certificate's chain link.")
    signature = models.TextField(help_text="Base64 of the Ed25519 signature over `canonical`.")
    key = models.ForeignKey(CertificateKey, on_delete=models.PROTECT, related_name="certificates")
    previous = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    issued_at = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True, help_text="Earliest expiry of its evidence; null: never.")
    superseded_at = models.DateTimeField(null=True, blank=True)
    supersede_reason = models.CharField(max_length=32, choices=SupersedeReason.choices, null=True, blank=True)

    class Meta:
        ordering = ["-issued_at", "serial"]
        constraints = [
            models.UniqueConstraint(
                fields=["device"],
                condition=Q(superseded_at__isnull=True),
                name="burnin_certificate_one_current_per_device",
            ),
            models.CheckConstraint(
                condition=Q(superseded_at__isnull=True, supersede_reason__isnull=True)
                | Q(superseded_at__isnull=False, supersede_reason__in=SupersedeReason.values),
                name="burnin_certificate_superseded_with_reason",
            ),
        ]
        indexes = [
            models.Index(fields=["device", "issued_at"], name="burnin_certificate_device_idx"),
            models.Index(
                fields=["site", "resource_class"],
                condition=Q(superseded_at__isnull=True),
                name="burnin_certificate_current_idx",
            ),
        ]

    def __str__(self) -> str:
        state = f"superseded ({self.supersede_reason})" if self.superseded_at else "current"
        return f"certificate {str(self.serial)[:8]} of {self.document['device']['hostname']}: {state}"


class AcceptanceOverride(models.Model):
    """A device moved to `accepted` without a valid certificate, by someone who said why."""

    device = models.ForeignKey("inventory.Device", on_delete=models.CASCADE, related_name="acceptance_overrides")
    actor = models.CharField(max_length=200, help_text="Who forced it (user name or client).")
    reason = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="burnin_override_has_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.device} accepted by {self.actor} without a certificate"


class PendingEvaluation(models.Model):
    """The work list of the pending-evaluation feed: a finished execution that has no evaluation
    for its current `updated_at` (or, after a threshold change, none for the current source key).

    Kept by the database itself, so every writer of executions and evaluations keeps it (the
    services, bulk loads, the admin, tests): statement-level triggers add a row when an execution
    finishes or changes after finishing, and remove it when an evaluation for that `updated_at`
    is written (migration 0005). A change of a requirement's resolved thresholds at a site is
    noticed by the feed itself (`PendingEvaluationKey`), which then re-lists that requirement's
    executions at the site once. The feed pages through this table, so a page costs what is
    pending, not the site's history."""

    execution = models.OneToOneField(
        TestExecution, on_delete=models.CASCADE, primary_key=True, related_name="pending_evaluation"
    )
    site = models.ForeignKey("inventory.Site", on_delete=models.CASCADE, related_name="+")
    requirement = models.ForeignKey("policies.Requirement", on_delete=models.CASCADE, related_name="+")
    updated_at = models.DateTimeField(help_text="The execution's `updated_at` (the feed's order).")

    class Meta:
        ordering = ["site", "updated_at", "execution"]
        indexes = [
            models.Index(fields=["site", "updated_at", "execution"], name="burnin_pending_feed_idx"),
            models.Index(fields=["site", "requirement"], name="burnin_pending_requirement_idx"),
        ]

    def __str__(self) -> str:
        return f"pending: {self.execution_id}"


class PendingEvaluationKey(models.Model):
    """The source key the work list was last brought up to date for, per (requirement, site).
    When the current resolution's key differs, the feed re-lists that requirement's finished
    executions at the site that lack an evaluation for the new key, and records the key."""

    requirement = models.ForeignKey("policies.Requirement", on_delete=models.CASCADE, related_name="+")
    site = models.ForeignKey("inventory.Site", on_delete=models.CASCADE, related_name="+")
    source_key = models.CharField(max_length=64)

    class Meta:
        ordering = ["site", "requirement"]
        constraints = [
            models.UniqueConstraint(fields=["requirement", "site"], name="burnin_pending_key_one_per_target"),
        ]

    def __str__(self) -> str:
        return f"{self.requirement_id} @ {self.site_id}: {self.source_key[:12]}"


class FingerprintSnapshot(models.Model):
    """A device's hardware fingerprint as its agent read it (`fleet_rules.fingerprint`): the
    inventory, its RFC 8785 bytes and their SHA-256. A new row only when the hash moves; while it
    stays, the current row's `last_seen_*` follow the reports. One row per device is current
    (`replaced_at` null); the others are its history, oldest first by `first_seen_at`."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    device = models.ForeignKey("inventory.Device", on_delete=models.CASCADE, related_name="fingerprints")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 hex of `canonical`.")
    canonical = models.TextField(help_text="The RFC 8785 bytes of the inventory (UTF-8): what is hashed and bound.")
    inventory = models.JSONField(help_text="The inventory (for display; `canonical` is the record).")
    first_seen_at = models.DateTimeField()
    first_execution = models.ForeignKey(
        TestExecution, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    last_seen_at = models.DateTimeField()
    last_execution = models.ForeignKey(
        TestExecution, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    reports = models.PositiveIntegerField(default=1, help_text="Execution reports that carried this fingerprint.")
    replaced_at = models.DateTimeField(null=True, blank=True, help_text="When another fingerprint was read.")

    class Meta:
        ordering = ["device", "-first_seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["device"], condition=Q(replaced_at__isnull=True), name="burnin_fingerprint_one_current"
            ),
            models.CheckConstraint(condition=Q(sha256__regex=SOURCE_KEY_PATTERN), name="burnin_fingerprint_sha256"),
        ]
        indexes = [models.Index(F("device"), F("first_seen_at").desc(), name="burnin_fingerprint_device_idx")]

    def __str__(self) -> str:
        state = "current" if self.replaced_at is None else "replaced"
        return f"fingerprint {self.sha256[:12]} of {self.device_id} ({state})"


class RemedyStep(models.Model):
    """A step of the remediation ladder a device was asked to take (a GPU reset, a reboot) because a burn-in
    window's events asked for it (`fleet_rules.xid_correlation`, `fleet_rules.remediation_ladder`): asked by
    `asked_by`, taken by `job` (a `remediation` job, created when the job that saw the events ended), judged by
    the burn-in after it (`judged_by`): cured, persisted or failed."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    device = models.ForeignKey("inventory.Device", on_delete=models.CASCADE, related_name="remedy_steps")
    step = models.CharField(max_length=16, choices=XidResolution.choices)
    outcome = models.CharField(max_length=16, choices=RemedyOutcome.choices, default=RemedyOutcome.UNDER_WAY)
    reason = models.TextField(help_text="Why it was asked, in the correlation rule's words.")
    gpus = models.JSONField(default=list, blank=True, help_text="The PCI bus ids of the GPUs the events named.")
    asked_by = models.ForeignKey(TestExecution, on_delete=models.SET_NULL, null=True, related_name="+")
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    judged_by = models.ForeignKey(TestExecution, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    result = models.TextField(blank=True, default="", help_text="How it ended, in words.")
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["device", "created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(step__in=[XidResolution.RESET_GPU.value, XidResolution.REBOOT.value]),
                name="burnin_remedystep_step_on_node",
            ),
            choices_check("outcome", RemedyOutcome, "burnin_remedystep_outcome_valid"),
        ]
        indexes = [
            models.Index(F("device"), F("created_at").desc(), name="burnin_remedy_device_idx"),
            models.Index(fields=["job"], name="burnin_remedy_job_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.step} of {self.device_id} ({self.outcome})"
