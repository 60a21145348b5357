"""One-time tokens for people's state-changing actions (Post/Redirect/Get, as Stripe's idempotency
keys): a preview carries a fresh token in its form; the POST that acts records the token with its
result in the same transaction (`action_once`). A replayed or reloaded POST finds the record and is
answered with the first result; two POSTs racing with one token meet on the primary key, the second
waits for the first to commit and then reads its result, so one action happens. An action that
fails rolls its record back: the token stays unused and the person may try again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.core.exceptions import FleetError
from fleet.jobs.models import ActionReceipt
from fleet_rules.vocabulary import PersonAction


class TokenUsedElsewhere(FleetError):
    """The token was already used for another action or subject: refused (400), nothing done."""


@dataclass(frozen=True)
class Receipt:
    token: UUID
    action: str
    subject: str
    location: str  # where the result is shown (a GET page)
    result: dict[str, Any]
    requested_by: str
    created_at: datetime
    replayed: bool  # True when an earlier POST with this token acted, not this one

    @classmethod
    def of(cls, row: ActionReceipt, *, replayed: bool) -> Receipt:
        return cls(
            row.token, row.action, row.subject, row.location, row.result, row.requested_by, row.created_at, replayed
        )


#: What an action does: act, then return its result page and what that page shows.
Perform = Callable[[], tuple[str, dict[str, Any]]]


@transaction.atomic
def action_once(*, token: UUID, action: PersonAction, subject: str, requested_by: str, perform: Perform) -> Receipt:
    """Run `perform` once per token. The record is inserted first, so a concurrent POST with the
    same token blocks on it until this transaction ends; `perform` runs in the same transaction."""
    now = timezone.now()
    try:
        with transaction.atomic():
            row = ActionReceipt.objects.create(
                token=token,
                action=action,
                subject=subject,
                location="",
                result={},
                requested_by=requested_by,
                created_at=now,
            )
    except IntegrityError:
        first = ActionReceipt.objects.get(token=token)
        if (first.action, first.subject) != (action, subject):
            raise TokenUsedElsewhere(
                f"This form's token was already used ({first.action}, {first.subject}); open a new preview."
            ) from None
        return Receipt.of(first, replayed=True)
    row.location, row.result = perform()
    row.save(update_fields=["location", "result"])
    return Receipt.of(row, replayed=False)


def receipt_of(token: UUID | None) -> Receipt | None:
    """The action a token was used for, if any (one query; none without a token)."""
    if token is None:
        return None
    row = ActionReceipt.objects.filter(token=token).first()
    return Receipt.of(row, replayed=True) if row is not None else None
