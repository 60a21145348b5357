"""Enrolment and burn-in eligibility per lifecycle state (`fleet_rules.eligibility`), no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleet_rules.eligibility import enrolled_sql, is_burn_in_eligible, is_enrolled
from fleet_rules.vocabulary import DeviceState

AT = datetime(2026, 12, 1, tzinfo=UTC)

#: state → (enrolled when enrolled_at is set, eligible for burn-in when enrolled)
TABLE = {
    DeviceState.STAGED: (True, True),
    DeviceState.BURN_IN: (True, True),
    DeviceState.ACCEPTED: (True, False),
    DeviceState.IN_SERVICE: (True, False),
    DeviceState.MAINTENANCE: (True, True),
    DeviceState.DECOMMISSIONED: (False, False),
    DeviceState.NEEDS_REPAIR: (True, False),
}


def test_the_table_covers_every_state():
    assert set(TABLE) == set(DeviceState)


@pytest.mark.parametrize("state", list(DeviceState))
def test_enrolled_and_eligible_per_state(state):
    enrolled, eligible = TABLE[state]
    assert is_enrolled(enrolled_at=AT, state=state) is enrolled
    assert is_burn_in_eligible(enrolled_at=AT, state=state) is eligible


@pytest.mark.parametrize("state", list(DeviceState))
def test_a_device_never_enrolled_is_neither(state):
    assert is_enrolled(enrolled_at=None, state=state) is False
    assert is_burn_in_eligible(enrolled_at=None, state=state) is False


def test_the_sql_fragment_states_the_same_rule():
    assert enrolled_sql("d") == "(d.enrolled_at IS NOT NULL AND d.state <> 'decommissioned')"
