"""Device hostnames are DNS-style from here on (fleet.inventory.hostnames): a validator on the
field and a named constraint under it.

Rows from before the rule are not renamed: a hostname is an operator's name for a machine, and a
guessed one would silently detach it from its racks, its jobs' history and the fleet file that
declares it. The migration refuses to run while any exists and lists them; rename them (the fleet
file, the admin, or SQL) and migrate again. `fleet check --database default` lists them before
an upgrade (inventory.E001)."""

from django.core.management.base import CommandError
from django.db import migrations, models

import fleet.inventory.hostnames

#: The rule as this migration applies it (a later change of the rule is a migration of its own).
HOSTNAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$"
SHOWN = 50


def shown(slug: str, hostname: str) -> str:
    """`site/hostname`, control characters escaped, long names cut."""
    text = hostname.encode("unicode_escape").decode("ascii")
    return f"{slug}/{text[:80]}…" if len(text) > 80 else f"{slug}/{text}"


def refuse_hostnames_that_break_the_rule(apps, schema_editor):
    Device = apps.get_model("inventory", "Device")
    offending = Device.objects.exclude(hostname__regex=HOSTNAME_PATTERN).order_by("site__slug", "hostname")
    count = offending.count()
    if not count:
        return
    names = [shown(slug, hostname) for slug, hostname in offending.values_list("site__slug", "hostname")[:SHOWN]]
    more = f" (and {count - SHOWN} more)" if count > SHOWN else ""
    raise CommandError(
        f"inventory.0004 refuses to run: {count} device hostname(s) break the hostname rule "
        "([A-Za-z0-9][A-Za-z0-9._-]*, at most 253 characters): "
        + ", ".join(names)
        + f"{more}. Rename them (the fleet file, the admin or SQL) and migrate again; nothing was changed."
    )


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0003_operatorcredential"),
    ]

    operations = [
        migrations.RunPython(refuse_hostnames_that_break_the_rule, migrations.RunPython.noop, elidable=False),
        migrations.AlterField(
            model_name="device",
            name="hostname",
            field=models.CharField(max_length=255, validators=[fleet.inventory.hostnames.validate_hostname]),
        ),
        migrations.AddConstraint(
            model_name="device",
            constraint=models.CheckConstraint(
                condition=models.Q(("hostname__regex", HOSTNAME_PATTERN)), name="inventory_device_hostname_format"
            ),
        ),
    ]
