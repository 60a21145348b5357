"""The lifecycle's records: every state change of a device (and every automatic change the breaker
held), the repairs that bring devices back to burn-in, and the breakers per site and class."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from fleet.core.models import choices_check, new_uuid
from fleet.inventory.models import Device, Site
from fleet_rules.vocabulary import DeviceState, RepairRerun, TransitionCause


class DeviceStateChange(models.Model):
    """One change of a device's lifecycle state, written in the transaction that made it. A held
    automatic move (`held_by_breaker`) is recorded with `to_state` the state it wanted and
    `held` set: the device stayed where it was."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="state_changes")
    from_state = models.CharField(max_length=32, choices=DeviceState.choices)
    to_state = models.CharField(max_length=32, choices=DeviceState.choices)
    at = models.DateTimeField()
    actor = models.CharField(max_length=255, help_text="A person (user:NAME), a client, or system.")
    cause = models.CharField(max_length=32, choices=TransitionCause.choices)
    held = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="")
    #: The ids the change refers to: certificate serial, repair, diagnosis, requirement, jobs.
    refs = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            choices_check("from_state", DeviceState, "lifecycle_change_from_valid"),
            choices_check("to_state", DeviceState, "lifecycle_change_to_valid"),
            choices_check("cause", TransitionCause, "lifecycle_change_cause_valid"),
            models.CheckConstraint(
                condition=Q(held=True) | ~Q(from_state=models.F("to_state")), name="lifecycle_change_moves"
            ),
        ]
        indexes = [
            models.Index(fields=["device", "-at"], name="lifecycle_change_device_idx"),
            # The breaker counts a scope's recent automatic moves to repair.
            models.Index(
                fields=["to_state", "at"],
                name="lifecycle_change_repair_idx",
                condition=Q(to_state=DeviceState.NEEDS_REPAIR, held=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.device_id}: {self.from_state} → {self.to_state} ({self.cause})"


class Repair(models.Model):
    """What was done to a device in `needs_repair` (or maintenance): attempts before it stop
    counting, and its re-burn-in is dispatched through the standard job path."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="repairs")
    summary = models.TextField()
    #: [{kind, slot, removed_serial, installed_serial}]
    parts = models.JSONField(default=list, blank=True)
    actor = models.CharField(max_length=255)
    created_at = models.DateTimeField()
    rerun_mode = models.CharField(max_length=16, choices=RepairRerun.choices, default=RepairRerun.ALL)
    job_ids = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [choices_check("rerun_mode", RepairRerun, "lifecycle_repair_rerun_valid")]
        indexes = [models.Index(fields=["device", "-created_at"], name="lifecycle_repair_device_idx")]

    def __str__(self) -> str:
        return f"repair of {self.device_id} at {self.created_at:%Y-%m-%d %H:%M}"


class Breaker(models.Model):
    """A tripped circuit breaker of one site × resource class: automatic moves to repair of that
    scope are held until an operator closes it."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="breakers")
    resource_class = models.CharField(max_length=255)
    opened_at = models.DateTimeField()
    detail = models.TextField(help_text="What tripped it, in words.")
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.CharField(max_length=255, blank=True, default="")
    close_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "resource_class"],
                condition=Q(closed_at__isnull=True),
                name="lifecycle_breaker_one_open",
            )
        ]

    def __str__(self) -> str:
        return f"breaker {self.resource_class} ({'closed' if self.closed_at else 'open'})"
