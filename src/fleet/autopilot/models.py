"""A site's autopilot settings and pause, and its log: one row per action with its reason."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.db.models import Q

from fleet.core.models import choices_check, new_uuid
from fleet.inventory.models import Site
from fleet_rules.autopilot import Settings
from fleet_rules.vocabulary import AutopilotActionKind


class SiteAutopilot(models.Model):
    """The autopilot settings of one site (from the fleet file's `autopilot:`), and whether an
    operator paused it. A site with no row has the autopilot off."""

    site = models.OneToOneField(Site, on_delete=models.CASCADE, primary_key=True, related_name="autopilot")
    enabled = models.BooleanField(default=False)
    max_under_test = models.PositiveIntegerField(default=Settings.max_under_test)
    rack_share = models.FloatField(default=Settings.rack_share)
    backoff = models.DurationField(default=Settings.backoff)
    isolate = models.BooleanField(default=Settings.isolate)
    renew_before = models.DurationField(default=Settings.renew_before)
    #: resource class → its own limit of devices under test at once (below the site's).
    class_limits = models.JSONField(default=dict, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=255, blank=True, default="")
    pause_reason = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["site__slug"]
        constraints = [
            models.CheckConstraint(condition=Q(max_under_test__gte=1), name="autopilot_site_max_positive"),
            models.CheckConstraint(
                condition=Q(rack_share__gt=0, rack_share__lte=1), name="autopilot_site_rack_share_range"
            ),
            models.CheckConstraint(condition=Q(backoff__gte=timedelta(0)), name="autopilot_site_backoff_nonnegative"),
        ]

    def __str__(self) -> str:
        return f"autopilot of {self.site_id} ({'on' if self.enabled else 'off'})"

    @property
    def settings(self) -> Settings:
        return Settings(
            enabled=self.enabled,
            max_under_test=self.max_under_test,
            rack_share=self.rack_share,
            backoff=self.backoff,
            isolate=self.isolate,
            renew_before=self.renew_before,
        )


class AutopilotAction(models.Model):
    """One thing a site's autopilot did (or an operator did to it: pause, resume), and why."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    kind = models.CharField(max_length=16, choices=AutopilotActionKind.choices)
    reason = models.TextField()
    device_ids = models.JSONField(default=list, blank=True)
    #: The devices' hostnames, as they were (the log reads without a join).
    hostnames = models.JSONField(default=list, blank=True)
    job_ids = models.JSONField(default=list, blank=True)
    actor = models.CharField(max_length=255, help_text="The leader process (autopilot@host:pid) or a person.")

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [choices_check("kind", AutopilotActionKind, "autopilot_action_kind_valid")]
        indexes = [models.Index(fields=["site", "-at", "-id"], name="autopilot_action_site_idx")]

    def __str__(self) -> str:
        return f"{self.kind} at {self.at:%Y-%m-%d %H:%M:%S}"
