"""SQL fragments that state a rule of the domain once, for every statement that needs it.

Each is generated from the same constants as the rule's Python form (the vocabulary's enums,
`fleet_rules.eligibility`, `fleet_rules.certificates`), so the SQL and the Python cannot name a
different state or verdict; a test holds each fragment to its Python form over a table of cases.
"""

from __future__ import annotations

from fleet.burnin.models import AcceptanceCertificate
from fleet.burnin.tables import sql
from fleet.inventory.models import Site
from fleet.lifecycle.models import Repair
from fleet_rules.attempts import Outcomes
from fleet_rules.eligibility import enrolled_sql
from fleet_rules.vocabulary import ExecutionStatus, RequirementScope, Verdict

_SINGLE_NODE = f"'{RequirementScope.SINGLE_NODE.value}'"
_MULTI_NODE = f"'{RequirementScope.MULTI_NODE.value}'"
_PASSED = f"'{Verdict.PASSED.value}'"
_COMPLETED = f"'{ExecutionStatus.COMPLETED.value}'"
_RUNNING = f"'{ExecutionStatus.RUNNING.value}'"


def requirement_target_sql(requirement: str, device: str) -> str:
    """A LATERAL subquery: the target that judges the device row `device` for the requirement row
    `requirement` — the device itself for a single-node requirement, its topology of the
    requirement's unit for a multi-node one (no row when it has none). Columns `id` and `label`
    (null for a device). Probes by key: the membership by (device, unit), the topology by id."""
    return sql(
        """(
    SELECT {dev}.id AS id, NULL::varchar AS label WHERE {req}.scope = {single_node}
    UNION ALL
    (SELECT t.id, t.label FROM {membership} m JOIN {topology} t ON t.id = m.topology_id
     WHERE {req}.scope = {multi_node} AND m.device_id = {dev}.id AND m.unit = {req}.unit
     ORDER BY t.id LIMIT 1)
)""",
        dev=device,
        req=requirement,
        single_node=_SINGLE_NODE,
        multi_node=_MULTI_NODE,
    )


def acceptable_sql(device: str, policy_id: str, policy_version: str) -> str:
    """`fleet_rules.certificates.rows_all_passed` for the device row `device` under the policy
    whose id and current version are the expressions `policy_id` and `policy_version`: the policy
    has a non-retired requirement, and none of them lacks a `passed` row at that version for the
    device's target. Each requirement's row is probed by its unique key."""
    return sql(
        """(EXISTS (SELECT 1 FROM {requirement} r WHERE r.policy_id = {policy_id} AND r.retired_at IS NULL)
    AND NOT EXISTS (
        SELECT 1 FROM {requirement} r
        LEFT JOIN LATERAL {target} tgt ON true
        LEFT JOIN LATERAL (
            SELECT p.id, p.verdict, p.policy_version FROM {progress} p
            WHERE p.requirement_id = r.id AND p.target_id = tgt.id LIMIT 1
        ) p ON true
        WHERE r.policy_id = {policy_id} AND r.retired_at IS NULL
          AND (p.id IS NULL OR p.verdict <> {passed} OR p.policy_version <> {policy_version})))""",
        target=requirement_target_sql("r", device),
        policy_id=policy_id,
        policy_version=policy_version,
        passed=_PASSED,
    )


def passed_at_version_sql(progress: str, policy_version: str) -> str:
    """`fleet_rules.planning.passed_at_version` for the projection row `progress` (which may be
    absent: a LEFT JOIN's nulls are not passed) against the policy version expression
    `policy_version`."""
    return f"coalesce({progress}.verdict = {_PASSED} AND {progress}.policy_version = {policy_version}, false)"


def counted_since_sql(execution: str, since: str, repaired_at: str | None = None) -> str:
    """Whether the execution row `execution` is an attempt that counts: created at or after `since`
    (the policy's `version_changed_at`, an expression; null: every version counts) and, on a device,
    not before the device's last repair (a repaired device starts a new count: `fleet_rules.lifecycle`).

    The repair is asked one of two ways, the same answer: with `repaired_at` (an expression for the
    device's latest repair's `created_at`, null when it has none), one bound on `created_at` — the
    caller probes the repairs once per target instead of once per attempt (a reconcile write at 8
    attempts per target spent 8,780 of a page's 43,365 buffers on this probe, EXPLAIN ANALYZE), and
    the bound is an index condition of the "latest execution of a target" indexes, so attempts
    before a repair or a version change are not read at all; without it, a probe of the repairs by
    device for each attempt: no repair after it. "No repair created after the attempt" and "the
    latest repair was created at or before it" are one condition, and `greatest` skips nulls."""
    if repaired_at is not None:
        return f"{execution}.created_at >= coalesce(greatest({since}, {repaired_at}), '-infinity'::timestamptz)"
    repair = sql(
        "NOT EXISTS (SELECT 1 FROM {repair} rp WHERE rp.device_id = {x}.device_id AND rp.created_at > {x}.created_at)",
        x=execution,
        repair=Repair._meta.db_table,
    )
    return f"(({since}) IS NULL OR {execution}.created_at >= ({since})) AND {repair}"


def counted_attempt_sql(execution: str, policy: str) -> str:
    """Whether the execution row `execution` is an attempt that counts under the policy row `policy`
    (`counted_since_sql` from its `version_changed_at`). Probes the repairs by device."""
    return f"({counted_since_sql(execution, f'{policy}.version_changed_at')})"


def _failure_sql(execution: str, evaluation: str) -> str:
    """An attempt that failed as hardware fails: it completed and failed (an error is not the
    hardware failing), and it was not a diagnostic run."""
    return sql(
        "{x}.status = {completed} AND NOT {x}.diagnostic AND NOT {ev}.passed",
        x=execution,
        ev=evaluation,
        completed=_COMPLETED,
    )


def counted_failure_sql(execution: str, evaluation: str, policy: str) -> str:
    """Whether the execution row `execution`, judged by the evaluation row `evaluation`, is a failure
    that counts toward sending its device to repair (`fleet_rules.lifecycle.failed_too_often`): it
    completed and failed (an error is not the hardware failing), it was not a diagnostic run, and it
    is a counted attempt (`counted_attempt_sql`)."""
    return f"({_failure_sql(execution, evaluation)} AND {counted_attempt_sql(execution, policy)})"


def target_history_sql(requirement: str, device: str, topology: str, since: str, repaired_at: str) -> str:
    """A LATERAL subquery over the counted attempts of the target (requirement id `requirement`,
    device id `device` or topology id `topology`, one of them null; `counted_since_sql` from `since`
    and the device's last repair `repaired_at`), read once for two figures:

    - `outcomes`, `fleet_rules.attempts.Outcomes`: the bit of each finished attempt judged by an
      evaluation of its current `updated_at` — errored, passed or failed (0 when none);
    - `failures`: its counted failures toward repair (`counted_failure_sql`'s condition).

    Read through the "latest execution of a target" indexes, so it costs the target's history:
    one pass instead of one per figure, and no probe of the repairs or the policy per attempt."""
    branch = """SELECT x.id, x.status, x.created_at, x.updated_at, x.device_id, x.diagnostic FROM {execution} x
        WHERE {value} IS NOT NULL AND x.requirement_id = {req} AND x.{column} = {value}
          AND NOT x.diagnostic AND x.status <> {running}"""
    return sql(
        """(
    SELECT coalesce(bit_or(CASE WHEN x.status = {errored} THEN {e} WHEN ev.passed THEN {p} ELSE {f} END)
                    FILTER (WHERE ev.execution_updated_at = x.updated_at), 0) AS outcomes,
           count(*) FILTER (WHERE {failure}) AS failures
    FROM ({device_branch} UNION ALL {topology_branch}) x
    JOIN {evaluation} ev ON ev.execution_id = x.id
    WHERE {counted}
)""",
        device_branch=sql(branch, value=device, column="device_id", req=requirement, running=_RUNNING),
        topology_branch=sql(branch, value=topology, column="topology_id", req=requirement, running=_RUNNING),
        errored=f"'{ExecutionStatus.ERRORED.value}'",
        e=str(int(Outcomes.ERRORED)),
        p=str(int(Outcomes.PASSED)),
        f=str(int(Outcomes.FAILED)),
        failure=_failure_sql("x", "ev"),
        counted=counted_since_sql("x", since, repaired_at),
    )


def class_completed_sql(issued: str) -> str:
    """The (site, resource class) scopes a statement's certificate insert completes (the class is
    **fully accepted**: every enrolled device holds a valid certificate), for its `class.accepted`
    events; `issued` names the CTE of the certificates it inserted (`device_id`, `site_id`,
    `resource_class`, `previous_id`). Columns `site_id`, `site_slug`, `resource_class`, `devices` (the
    class's enrolled devices), `certificates` (issued in it by the statement).

    A scope counts when a device the statement certified held no valid certificate when the page
    began (a renewal — the previous certificate superseded by this page at `%(now)s` while still
    valid — leaves its class as it was) and every other enrolled device of it holds a valid
    certificate (`valid_now`: current, not past its `valid_until`). The statement's snapshot cannot
    see a concurrent page's certificates, so pages issuing in one class take its acceptance lock first
    (`fleet.burnin.supersession.supersede_run`'s `issuing_in`, a statement before): the later page
    sees the earlier one's, and of two pages finishing a class exactly one finds it complete. The
    scan stops at the class's first device without a valid certificate; only a class found complete
    is counted whole."""
    return sql(
        """
    SELECT k.site_id, s.slug AS site_slug, k.resource_class,
           (SELECT count(*) FROM {device} e
            WHERE e.site_id = k.site_id AND e.resource_class = k.resource_class AND {enrolled_e}) AS devices,
           k.certificates
    FROM (
        SELECT i.site_id, i.resource_class, count(*) AS certificates FROM {issued} i
        LEFT JOIN {certificate} p ON p.serial = i.previous_id
        WHERE p.serial IS NULL OR p.superseded_at IS DISTINCT FROM %(now)s
           OR (p.valid_until IS NOT NULL AND p.valid_until <= %(now)s)
        GROUP BY i.site_id, i.resource_class
    ) k
    JOIN {site} s ON s.id = k.site_id
    WHERE NOT EXISTS (
        SELECT 1 FROM {device} o
        WHERE o.site_id = k.site_id AND o.resource_class = k.resource_class AND {enrolled_o}
          AND NOT EXISTS (SELECT 1 FROM {issued} n WHERE n.device_id = o.id)
          AND NOT EXISTS (
              SELECT 1 FROM {certificate} c WHERE c.device_id = o.id AND c.superseded_at IS NULL
                AND (c.valid_until IS NULL OR c.valid_until > %(now)s))
    )""",
        issued=issued,
        site=Site._meta.db_table,
        certificate=AcceptanceCertificate._meta.db_table,
        enrolled_e=enrolled_sql("e"),
        enrolled_o=enrolled_sql("o"),
    )
