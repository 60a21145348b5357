"""Shared model building blocks (no concrete models live in core)."""

import uuid

from django.db import models


class TimeStamped(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()


def choices_check(field: str, choices: type[models.TextChoices], name: str) -> models.CheckConstraint:
    """A named check constraint holding an enum column to its TextChoices values."""
    return models.CheckConstraint(condition=models.Q(**{f"{field}__in": choices.values}), name=name)
