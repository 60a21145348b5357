"""The vocabulary in plain words, for people: what a verdict looks like on a screen, and what each
reason a rerun was not dispatched means. One place, used by the dashboard, `fleet rerun` and the
demo alike.

Every verdict has a symbol beside its colour, so a grid reads without colour (WCAG 1.4.1).
"""

from __future__ import annotations

from fleet_rules.vocabulary import DeviceState, ExclusionReason, SkipReason, Verdict, WorkflowName

#: The order verdicts are shown in: done (good, bad, could not judge), then still to come.
DISPLAY_ORDER: tuple[Verdict, ...] = (
    Verdict.PASSED,
    Verdict.FAILED,
    Verdict.ERRORED,
    Verdict.EXPIRED,
    Verdict.IN_PROGRESS,
    Verdict.NOT_RUN,
)

#: (symbol, word) per lifecycle state: the dashboard's one word for a device (`fleet_rules.lifecycle`).
STATE_SIGNS: dict[DeviceState, tuple[str, str]] = {
    DeviceState.STAGED: ("·", "staged"),
    DeviceState.BURN_IN: ("◷", "burn-in"),
    DeviceState.ACCEPTED: ("✓", "accepted"),
    DeviceState.IN_SERVICE: ("✓", "in service"),
    DeviceState.NEEDS_REPAIR: ("✗", "needs repair"),
    DeviceState.MAINTENANCE: ("⚙", "maintenance"),
    DeviceState.DECOMMISSIONED: ("–", "decommissioned"),
}

#: (symbol, word) per verdict.
VERDICT_SIGNS: dict[Verdict, tuple[str, str]] = {
    Verdict.PASSED: ("✓", "passed"),
    Verdict.FAILED: ("✗", "failed"),
    Verdict.ERRORED: ("!", "errored"),
    Verdict.IN_PROGRESS: ("◷", "in progress"),
    Verdict.NOT_RUN: ("·", "not run"),
    # ⊘, not ⌛: the hourglass is drawn from an emoji font, which a plain Debian desktop (and its
    # Chromium) lacks, leaving an empty box; every symbol here is in DejaVu Sans.
    Verdict.EXPIRED: ("⊘", "expired"),
}

#: What a verdict means, where a legend says more than its word.
VERDICT_HINTS: dict[Verdict, str] = {
    Verdict.ERRORED: "the test could not judge",
    Verdict.EXPIRED: "a pass older than its requirement's evidence_valid_for",
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

#: How a cohort member's single-node verdict blocks its rack's collective, in words.
_BLOCKING = {
    Verdict.FAILED: "{host} failed {requirement}",
    Verdict.ERRORED: "{host} errored on {requirement}",
    Verdict.IN_PROGRESS: "{host} is still running {requirement}",
    Verdict.EXPIRED: "{host}'s pass of {requirement} expired",
    Verdict.NOT_RUN: "{host} has not run {requirement}",
}


def blocker_text(hostname: str, requirement: str, verdict: str) -> str:
    """`a03-n04 failed nccl-in-node`: one member's shortfall that blocks its cohort
    (`fleet_rules.planning.single_node_shortfall`)."""
    template = _BLOCKING.get(Verdict(verdict)) if verdict in Verdict.values else None
    template = template or "{host} has not passed {requirement}"
    return template.format(host=hostname, requirement=requirement)


#: A job's workflow in the domain's words (headings, lists).
WORKFLOW_WORDS: dict[str, str] = {
    WorkflowName.SINGLE_NODE: "Single-node burn-in",
    WorkflowName.MULTI_NODE_COLLECTIVE: "Collective burn-in",
}
