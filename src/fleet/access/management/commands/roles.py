"""`fleet roles`: create or re-sync the standard groups (viewer, operator, admin)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from fleet.access.roles import roles_sync


class Command(BaseCommand):
    help = "Create or re-sync the standard roles for people: viewer, operator, admin (Django groups)."

    def handle(self, *args, **options):
        for role, permissions in roles_sync().items():
            self.stdout.write(f"{role}: {len(permissions)} permissions")
