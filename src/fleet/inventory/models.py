"""Inventory: where devices are, who runs them, and how they are grouped."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from fleet.core.models import TimeStamped, choices_check, new_uuid
from fleet.inventory.hostnames import HOSTNAME_PATTERN, validate_hostname
from fleet_rules.eligibility import is_burn_in_eligible, is_enrolled
from fleet_rules.vocabulary import DeviceState, TopologyUnit

SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"


class Site(TimeStamped):
    """A data-centre site; the unit of scoping for satellites, devices and reruns."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    slug = models.CharField(max_length=100, unique=True)
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(slug__regex=SLUG_PATTERN), name="inventory_site_slug_format"),
        ]

    def __str__(self) -> str:
        return self.slug


class Satellite(TimeStamped):
    """A site control plane whose agent runs burn-in on the devices it manages."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="satellites")
    name = models.CharField(max_length=100)
    advertised_workflows = models.JSONField(
        default=list, blank=True, help_text="[{name, version}] as last advertised by the agent's heartbeat."
    )
    agent_version = models.CharField(max_length=100, blank=True, default="")
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["site__slug", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="inventory_satellite_unique_name_per_site"),
        ]

    def __str__(self) -> str:
        return f"{self.site.slug}/{self.name}" if self.site_id else self.name

    def advertises(self, workflow_name: str) -> bool:
        return any(w.get("name") == workflow_name for w in self.advertised_workflows or [])


class SatelliteCredential(TimeStamped):
    """Binds one OAuth2 client to one satellite: its tokens act only on that satellite's site."""

    satellite = models.OneToOneField(Satellite, on_delete=models.CASCADE, related_name="credential")
    application = models.OneToOneField(
        "oauth2_provider.Application", on_delete=models.CASCADE, related_name="satellite_credential"
    )

    class Meta:
        ordering = ["satellite"]

    def __str__(self) -> str:
        return f"credential of {self.satellite}"


class OperatorCredential(TimeStamped):
    """The scopes a person's automation client was issued for (`fleet client-credentials
    --scope`). Its tokens get at most these, and act with at most its owner's permissions."""

    application = models.OneToOneField(
        "oauth2_provider.Application", on_delete=models.CASCADE, related_name="operator_credential"
    )
    scopes = models.JSONField(default=list, help_text="Scope names this client may ask for.")

    class Meta:
        ordering = ["application"]

    def __str__(self) -> str:
        return f"scopes of {self.application}"


class Topology(TimeStamped):
    """A group of devices tested together (a rack, a pod, an NVLink domain)."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="topologies")
    unit = models.CharField(max_length=32, choices=TopologyUnit.choices)
    label = models.CharField(max_length=100)
    satellite = models.ForeignKey(
        Satellite,
        on_delete=models.PROTECT,
        related_name="topologies",
        help_text="Runs this topology's collective jobs; its multi-node targets are in this satellite's scope.",
    )

    class Meta:
        ordering = ["site__slug", "unit", "label"]
        verbose_name_plural = "topologies"
        constraints = [
            models.UniqueConstraint(fields=["site", "unit", "label"], name="inventory_topology_unique_label"),
            choices_check("unit", TopologyUnit, "inventory_topology_unit_valid"),
        ]
        indexes = [
            # A reconcile page reads a satellite's topologies of one unit in id order.
            models.Index(fields=["satellite", "unit", "id"], name="inventory_topology_scope_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.unit}:{self.label}"


class Device(TimeStamped):
    """A server that must pass burn-in before it is sold."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="devices")
    satellite = models.ForeignKey(Satellite, on_delete=models.PROTECT, related_name="devices")
    #: DNS-style, at most 253 characters (fleet.inventory.hostnames): it names files and URLs. No
    #: help_text: it would change the generated OpenAPI of every device read.
    hostname = models.CharField(max_length=255, validators=[validate_hostname])
    serial = models.CharField(max_length=128, blank=True, default="")
    resource_class = models.CharField(max_length=255)
    state = models.CharField(max_length=32, choices=DeviceState.choices, default=DeviceState.STAGED)
    enrolled_at = models.DateTimeField(
        null=True, blank=True, help_text="Null until enrolled; enrolled devices are burn-in targets."
    )
    topologies: models.ManyToManyField[Topology, TopologyMembership] = models.ManyToManyField(
        Topology, through="TopologyMembership", related_name="devices"
    )

    class Meta:
        ordering = ["site__slug", "hostname"]
        constraints = [
            models.UniqueConstraint(fields=["site", "hostname"], name="inventory_device_unique_hostname"),
            models.CheckConstraint(
                condition=Q(hostname__regex=HOSTNAME_PATTERN), name="inventory_device_hostname_format"
            ),
            choices_check("state", DeviceState, "inventory_device_state_valid"),
        ]
        indexes = [
            # Reconcile enumerates a scope's devices in id order.
            models.Index(fields=["satellite", "resource_class", "id"], name="inventory_device_scope_idx"),
            models.Index(fields=["site", "resource_class", "state"], name="inventory_device_site_rc_idx"),
            # A class's enrolled devices longest enrolled first: the site page's devices waiting
            # longest for a certificate are the first uncertified entries, not a sort of the site;
            # with the id and state, its counts of enrolled and accepted devices read the index alone.
            models.Index(
                fields=["site", "resource_class", "enrolled_at", "hostname"],
                include=["id", "state"],
                condition=Q(enrolled_at__isnull=False),
                name="inventory_device_enrolled_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.hostname

    @property
    def is_enrolled(self) -> bool:
        return is_enrolled(enrolled_at=self.enrolled_at, state=self.state)

    @property
    def is_burn_in_eligible(self) -> bool:
        return is_burn_in_eligible(enrolled_at=self.enrolled_at, state=self.state)


class TopologyMembership(models.Model):
    """A device's place in one topology; `unit` is copied from the topology so the database can
    hold "at most one topology per unit per device"."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="memberships")
    topology = models.ForeignKey(Topology, on_delete=models.CASCADE, related_name="memberships")
    unit = models.CharField(max_length=32, choices=TopologyUnit.choices)

    class Meta:
        ordering = ["topology", "device"]
        constraints = [
            models.UniqueConstraint(fields=["device", "unit"], name="inventory_membership_one_topology_per_unit"),
            models.UniqueConstraint(fields=["topology", "device"], name="inventory_membership_unique"),
            choices_check("unit", TopologyUnit, "inventory_membership_unit_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.device_id} in {self.topology_id}"
