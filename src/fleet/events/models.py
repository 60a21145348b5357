"""The outbox and the webhooks' records.

`Event` is the transactional outbox: each writer inserts its events in the transaction (often the
statement) that makes the change, so an event exists exactly when its change is committed. `fanned_out`
says whether the delivery worker has made its `Delivery` rows yet (one per matching subscription)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from fleet.core.models import choices_check, new_uuid
from fleet.inventory.models import Site
from fleet_rules.vocabulary import DeliveryStatus, EventType


class Event(models.Model):
    """One CloudEvents 1.0 event (`fleet.events.cloudevents.document` composes the JSON): its id is
    also every delivery's `webhook-id`, so a receiver deduplicates by it."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    type = models.CharField(max_length=96, choices=EventType.choices)
    #: What the event is about, `sites/<slug>/devices/<hostname>` or `sites/<slug>/breakers/<class>`.
    subject = models.CharField(max_length=512)
    time = models.DateTimeField()
    #: The site it happened at (a subscription's site filter); no foreign key, so an insert
    #: composed into a writer's statement takes no lock on the site.
    site_id = models.UUIDField(null=True)
    data = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    fanned_out = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["time", "id"]
        constraints = [choices_check("type", EventType, "events_event_type_valid")]
        indexes = [
            models.Index(fields=["time", "id"], name="events_event_unfanned_idx", condition=Q(fanned_out=False)),
            models.Index(fields=["subject", "time"], name="events_event_subject_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.subject}"


class Subscription(models.Model):
    """A receiver of events: where to (`url`), which (`event_types`, empty: every type; `site`, null:
    every site), signed with `secret`. `allow_private`: an admin's say-so that this URL may reach a
    loopback, link-local or private address (refused otherwise: SSRF). `failing_since`: set when a
    delivery was given up after the retry window (an alert fires), cleared by the next success."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    name = models.SlugField(max_length=100, unique=True)
    url = models.URLField(max_length=2000)
    event_types = ArrayField(models.CharField(max_length=96, choices=EventType.choices), default=list, blank=True)
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions")
    secret = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    allow_private = models.BooleanField(default=False)
    retry_window_seconds = models.PositiveIntegerField(default=24 * 3600)
    failing_since = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=255, default="", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Delivery(models.Model):
    """One event's delivery to one subscription (at least once: a retry, a redelivery or a worker
    killed mid-flight sends the same `webhook-id` again). The last try's answer is kept: status code,
    latency, error; `leased_until`: a worker is sending it (another takes it once the lease lapses)."""

    id = models.UUIDField(primary_key=True, default=new_uuid, editable=False)
    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.SCHEDULED)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True)
    leased_until = models.DateTimeField(null=True)
    last_attempt_at = models.DateTimeField(null=True)
    response_code = models.PositiveSmallIntegerField(null=True)
    latency_ms = models.PositiveIntegerField(null=True)
    error = models.TextField(default="", blank=True)
    delivered_at = models.DateTimeField(null=True)
    #: The event's subject and time, copied at fan-out: a delivery waits while an earlier one of
    #: its subscription and subject is still scheduled (per-subject order, `fleet.events.delivery`).
    subject = models.CharField(max_length=512, default="", blank=True)
    event_time = models.DateTimeField(null=True)

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            choices_check("status", DeliveryStatus, "events_delivery_status_valid"),
            models.UniqueConstraint(fields=["subscription", "event"], name="events_delivery_once"),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"], name="events_delivery_due_idx", condition=Q(status=DeliveryStatus.SCHEDULED)
            ),
            models.Index(fields=["subscription", "-created_at"], name="events_delivery_log_idx"),
            models.Index(
                fields=["subscription", "subject", "event_time"],
                name="events_delivery_subject_idx",
                condition=Q(status=DeliveryStatus.SCHEDULED),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.subscription_id}: {self.status}"
