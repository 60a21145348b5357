"""The vocabulary in plain words, for people: what a verdict looks like on a screen, and what each
reason a rerun was not dispatched means. One place, used by the dashboard, `fleet rerun` and the
demo alike.

Every verdict has a symbol beside its colour, so a grid reads without colour (WCAG 1.4.1).
"""

from __future__ import annotations

from fleet_rules.vocabulary import ExclusionReason, SkipReason, Verdict

#: The order verdicts are shown in: done (good, bad, could not judge), then still to come.
DISPLAY_ORDER: tuple[Verdict, ...] = (
    Verdict.PASSED,
    Verdict.FAILED,
    Verdict.ERRORED,
    Verdict.EXPIRED,
    Verdict.IN_PROGRESS,
    Verdict.NOT_RUN,
)

#: (symbol, word) per verdict.
VERDICT_SIGNS: dict[Verdict, tuple[str, str]] = {
    Verdict.PASSED: ("✓", "passed"),
    Verdict.FAILED: ("✗", "failed"),
    Verdict.ERRORED: ("!", "errored"),
    Verdict.IN_PROGRESS: ("◷", "in progress"),
    Verdict.NOT_RUN: ("·", "not run"),
    Verdict.EXPIRED: ("⌛", "expired"),
}

SKIP_EXPLANATIONS: dict[SkipReason, str] = {
    SkipReason.DEVICE_INELIGIBLE: "the device's lifecycle state does not allow burn-in (only staged, burn-in and "
    "maintenance do; a device in needs_repair comes back when its repair is recorded), or it is not enrolled",
    SkipReason.WORKFLOW_UNAVAILABLE: "the satellite that runs it does not advertise the workflow (its agent has not "
    "sent a heartbeat with it)",
    SkipReason.POLICY_CHANGED: "the acceptance policy changed since the projection row was written: wait for the "
    "next reconcile sweep",
    SkipReason.PROJECTION_PENDING: "projection pending: the latest result is not evaluated and reconciled yet",
    SkipReason.ALREADY_SATISFIED: "it already passed under the current policy (choose mode 'all' to rerun it anyway)",
    SkipReason.ALREADY_DISPATCHED: "an active job already covers it",
    SkipReason.DEVICE_CONTENDED: "another active job holds the device",
    SkipReason.NO_POLICY_SATISFYING_PARAMETER_SOURCE: "no parameter profile of the resource class and test meets the "
    "requirement's parameter constraints",
    SkipReason.TOPOLOGY_COHORT_BLOCKED: "the rack (or domain) runs as one cohort, and not every member is selected, "
    "eligible, free and through every single-node requirement",
}

EXCLUSION_EXPLANATIONS: dict[ExclusionReason, str] = {
    ExclusionReason.NO_ACCEPTANCE_POLICY: "no acceptance policy exists for the device's resource class",
    ExclusionReason.NO_SINGLE_NODE_REQUIREMENTS: "its policy has no single-node requirements",
    ExclusionReason.NO_RERUN_REQUIREMENTS: "none of its policy's requirements may be rerun",
}
