"""The anchor: how fast this PostgreSQL upserts rows shaped like evaluation results when nothing
but one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO UPDATE` per 500-row batch stands in the
way (no loading, no classification, no Django). Our figures are read as fractions of it.

Two tables: a temporary one (not WAL-logged, so an upper bound) and an ordinary one, which pays
the same WAL and commit cost as our tables.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from uuid import uuid4

from django.db import connection
from django.utils import timezone
from psycopg import sql
from psycopg.types.json import Jsonb

from bench.timing import Timing, timed

BATCH = 500
ROWS_PER_SCALE = 20_000

_CREATE = sql.SQL("""
CREATE {temporary} TABLE {table} (
    execution_id uuid PRIMARY KEY,
    passed boolean NOT NULL,
    reason text,
    metric_evaluations jsonb NOT NULL,
    evaluation_source_key varchar(64) NOT NULL,
    execution_updated_at timestamptz NOT NULL,
    materialised_at timestamptz NOT NULL
)""")

_UPSERT = sql.SQL("""
INSERT INTO {table} AS r
    (execution_id, passed, reason, metric_evaluations, evaluation_source_key, execution_updated_at, materialised_at)
SELECT * FROM unnest(%s::uuid[], %s::boolean[], %s::text[], %s::jsonb[], %s::varchar[], %s::timestamptz[],
                     %s::timestamptz[])
ON CONFLICT (execution_id) DO UPDATE SET
    passed = EXCLUDED.passed,
    reason = EXCLUDED.reason,
    metric_evaluations = EXCLUDED.metric_evaluations,
    evaluation_source_key = EXCLUDED.evaluation_source_key,
    execution_updated_at = EXCLUDED.execution_updated_at,
    materialised_at = EXCLUDED.materialised_at
""")


@dataclass(frozen=True)
class AnchorRow:
    table: str
    rows: int
    insert: Timing  # into an empty table
    update: Timing  # every row conflicts and is replaced

    @property
    def insert_rate(self) -> float:
        return self.insert.rate(self.rows)

    @property
    def update_rate(self) -> float:
        return self.update.rate(self.rows)


def _batches(rows: int) -> list[list[list]]:
    now = timezone.now()
    key = secrets.token_hex(32)
    evaluation = {
        "busbw_gbps": {
            "passed": True,
            "value_evaluation": {"passed": True, "threshold": 400, "comparator": "gte"},
            "statistic_evaluations": None,
        }
    }
    ids = [uuid4() for _ in range(rows)]
    batches = []
    for start in range(0, rows, BATCH):
        chunk = ids[start : start + BATCH]
        n = len(chunk)
        batches.append(
            [
                chunk,
                [True] * n,
                [None] * n,
                [Jsonb(evaluation)] * n,
                [key] * n,
                [now - timedelta(hours=1)] * n,
                [now] * n,
            ]
        )
    return batches


def _measure(table: str, temporary: bool, batches: list[list[list]], rows: int, runs: int) -> AnchorRow:
    name = sql.Identifier(table)
    upsert = _UPSERT.format(table=name)
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("DROP TABLE IF EXISTS {table}").format(table=name))
        cursor.execute(_CREATE.format(temporary=sql.SQL("TEMPORARY" if temporary else ""), table=name))

        def truncate():
            cursor.execute(sql.SQL("TRUNCATE {table}").format(table=name))

        def upsert_all():
            # Autocommit: every batch is its own transaction, as every request is for us.
            for params in batches:
                cursor.execute(upsert, params)

        # Every ratio divides by these: always the median of at least three runs (one run of
        # about a second read 9.8k rows/s once, against 21–28k in the runs around it).
        insert = timed(upsert_all, runs=max(3, runs), before=truncate, every_run=True)
        update = timed(upsert_all, runs=max(3, runs), every_run=True)
        cursor.execute(sql.SQL("DROP TABLE {table}").format(table=name))
    return AnchorRow("temporary" if temporary else "ordinary", rows, insert, update)


def anchor_measure(*, scale: float, runs: int) -> list[AnchorRow]:
    # Never below the default size: a small anchor is dominated by its first batches and reads low.
    rows = max(ROWS_PER_SCALE, int(ROWS_PER_SCALE * scale))
    batches = _batches(rows)
    return [
        _measure("bench_anchor_temporary", True, batches, rows, runs),
        _measure("bench_anchor_ordinary", False, batches, rows, runs),
    ]
