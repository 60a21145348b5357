"""Wake the autopilot's leader when something it decides on changes: a statement-level trigger per
table NOTIFYs `fleet_autopilot` (one notification per statement, merged per transaction by
PostgreSQL; no round trip is added to any request, so no query count changes)."""

from django.db import migrations

CHANNEL = "fleet_autopilot"
TABLES = (
    "jobs_job",
    "burnin_policyprogress",
    "lifecycle_repair",
    "lifecycle_breaker",
    "autopilot_siteautopilot",
)

FUNCTION = f"""
CREATE OR REPLACE FUNCTION autopilot_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME);
    RETURN NULL;
END $$;
"""


def _create(table: str) -> str:
    return (
        f"CREATE TRIGGER autopilot_wake AFTER INSERT OR UPDATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION autopilot_wake();"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("autopilot", "0001_initial"),
        ("jobs", "0003_lifecycle_actions"),
        ("burnin", "0010_progress_outcomes"),
        ("lifecycle", "0003_cause_renewal"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION IF EXISTS autopilot_wake() CASCADE;"),
        *[migrations.RunSQL(_create(t), f"DROP TRIGGER IF EXISTS autopilot_wake ON {t};") for t in TABLES],
    ]
