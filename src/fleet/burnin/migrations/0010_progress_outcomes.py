"""Each projection row's execution's `finished_at` and the outcomes of its counted attempts
(`PolicyProgress.outcomes`), filled for the rows that exist (the reconcile keeps them from now
on); the partial indexes of failing rows by time and of passes after failures; the site-verdict
index holding what the site page counts."""

from django.db import migrations, models

# The execution's `finished_at`, and `fleet.burnin.fragments.attempt_outcomes_sql` as it is at this migration (frozen: a migration
# means what it meant when written): errored 4, passed 1, failed 2.
BACKFILL = """
UPDATE burnin_policyprogress p SET
finished_at = (SELECT e.finished_at FROM burnin_testexecution e WHERE e.id = p.execution_id),
outcomes = coalesce((
    SELECT bit_or(CASE WHEN x.status = 'errored' THEN 4 WHEN ev.passed THEN 1 ELSE 2 END)
    FROM (SELECT x.id, x.status, x.created_at, x.updated_at, x.device_id FROM burnin_testexecution x
          WHERE p.device_id IS NOT NULL AND x.requirement_id = p.requirement_id AND x.device_id = p.device_id
            AND NOT x.diagnostic AND x.status <> 'running'
          UNION ALL
          SELECT x.id, x.status, x.created_at, x.updated_at, x.device_id FROM burnin_testexecution x
          WHERE p.topology_id IS NOT NULL AND x.requirement_id = p.requirement_id AND x.topology_id = p.topology_id
            AND NOT x.diagnostic AND x.status <> 'running') x
    JOIN burnin_evaluationresult ev ON ev.execution_id = x.id AND ev.execution_updated_at = x.updated_at
    JOIN policies_requirement r ON r.id = p.requirement_id
    JOIN policies_acceptancepolicy pol ON pol.id = r.policy_id
    WHERE (pol.version_changed_at IS NULL OR x.created_at >= pol.version_changed_at)
      AND NOT EXISTS (SELECT 1 FROM lifecycle_repair rp WHERE rp.device_id = x.device_id AND rp.created_at > x.created_at)
), 0)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("burnin", "0009_execution_health"),
        ("inventory", "0005_needs_repair"),
        ("lifecycle", "0001_initial"),
        ("policies", "0006_lifecycle_settings"),
    ]

    operations = [
        migrations.AddField(
            model_name="policyprogress",
            name="outcomes",
            field=models.PositiveSmallIntegerField(
                db_default=0,
                default=0,
                help_text="The outcomes its counted attempts have had (fleet_rules.attempts.Outcomes: passed 1, "
                "failed 2, errored 4), as of the reconcile that wrote the row: flaky when more than one.",
            ),
        ),
        migrations.AddField(
            model_name="policyprogress",
            name="finished_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When its execution finished, written with the row: the failures list's order, from an index.",
                null=True,
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="policyprogress",
            index=models.Index(
                condition=models.Q(("verdict__in", ["failed", "errored"])),
                fields=["site", "-finished_at", "-id"],
                name="burnin_prog_failing_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="policyprogress",
            index=models.Index(
                condition=models.Q(("outcomes__gte", 2), ("verdict", "passed")),
                fields=["site"],
                name="burnin_prog_passed_after_idx",
            ),
        ),
        # The site page's counts by requirement read the site-verdict index alone.
        migrations.RemoveIndex(model_name="policyprogress", name="burnin_prog_site_verd_inc_idx"),
        migrations.AddIndex(
            model_name="policyprogress",
            index=models.Index(
                fields=["site", "verdict"],
                include=("execution", "policy_version", "requirement", "outcomes"),
                name="burnin_prog_site_verd_inc_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="policyprogress",
            constraint=models.CheckConstraint(
                condition=models.Q(("outcomes__lte", 7)), name="burnin_progress_outcomes_valid"
            ),
        ),
    ]
