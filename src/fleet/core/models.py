"""Shared model building blocks (no concrete models live in core)."""

import uuid

from django.db import models

from fleet_rules.vocabulary import Vocabulary


class TimeStamped(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()


def choices_check(field: str, vocabulary: type[Vocabulary], name: str) -> models.CheckConstraint:
    """A named check constraint holding an enum column to its vocabulary's values."""
    return models.CheckConstraint(condition=models.Q(**{f"{field}__in": vocabulary.values}), name=name)
