"""Which devices burn-in counts, and on which it may run.

*Enrolled*: `enrolled_at` is set and the device is not decommissioned — enrolled devices are the
projection's targets. *Eligible*: enrolled and in a state that allows burn-in
(`BURN_IN_STATES`) — only eligible devices may be held by a job. Each rule exists once; the
projection's queries use the SQL fragment generated here from the same states as the Python
predicate, so the reconcile sweep and the planner can never disagree about who is enrolled.
"""

from __future__ import annotations

from datetime import datetime

from fleet_rules.vocabulary import BURN_IN_STATES, DeviceState


def is_enrolled(*, enrolled_at: datetime | None, state: str) -> bool:
    return enrolled_at is not None and state != DeviceState.DECOMMISSIONED


def is_burn_in_eligible(*, enrolled_at: datetime | None, state: str) -> bool:
    return is_enrolled(enrolled_at=enrolled_at, state=state) and state in BURN_IN_STATES


def enrolled_sql(alias: str) -> str:
    """`is_enrolled` for the device row `alias` (constants only: safe to embed in SQL text)."""
    return f"({alias}.enrolled_at IS NOT NULL AND {alias}.state <> '{DeviceState.DECOMMISSIONED.value}')"
