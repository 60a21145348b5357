"""How a job may end (`fleet_rules.jobs`), no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet_rules.jobs import EndTransition, end_transition, lease_expired
from fleet_rules.vocabulary import JOB_OUTCOMES, JobStatus

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize("target", JOB_OUTCOMES)
@pytest.mark.parametrize("current", [JobStatus.QUEUED, JobStatus.RUNNING])
@pytest.mark.parametrize("retry_is_noop", [True, False])
def test_an_active_job_ends(current, target, retry_is_noop):
    assert end_transition(current, target, retry_is_noop=retry_is_noop) is EndTransition.END


@pytest.mark.parametrize("ended", JOB_OUTCOMES)
@pytest.mark.parametrize("target", JOB_OUTCOMES)
def test_an_ended_job_never_moves_again(ended, target):
    expected = EndTransition.REPEAT if ended == target else EndTransition.REFUSE
    assert end_transition(ended, target, retry_is_noop=True) is expected
    assert end_transition(ended, target, retry_is_noop=False) is EndTransition.REFUSE


@pytest.mark.parametrize("target", [JobStatus.QUEUED, JobStatus.RUNNING])
def test_a_job_cannot_end_as_an_active_status(target):
    with pytest.raises(ValueError, match="not a way for a job to end"):
        end_transition(JobStatus.RUNNING, target, retry_is_noop=True)


@pytest.mark.parametrize(
    ("status", "lease", "expired"),
    [
        (JobStatus.RUNNING, NOW - timedelta(seconds=1), True),
        (JobStatus.RUNNING, NOW, False),
        (JobStatus.RUNNING, NOW + timedelta(seconds=1), False),
        (JobStatus.RUNNING, None, False),
        (JobStatus.QUEUED, NOW - timedelta(days=1), False),
        (JobStatus.SUCCEEDED, NOW - timedelta(days=1), False),
    ],
)
def test_lease_expiry(status, lease, expired):
    assert lease_expired(status=status, lease_expires_at=lease, now=NOW) is expired


def test_a_job_s_outcome_is_what_its_tests_found_not_how_its_mechanics_ran():
    from fleet_rules.jobs import JobTally, job_outcome

    assert job_outcome("succeeded", JobTally(expected=2, failed=2)).words == "finished — 2 of 2 tests failed"
    assert job_outcome("succeeded", JobTally(expected=3, passed=3)).words == "finished — all 3 passed"
    assert job_outcome("succeeded", JobTally(expected=3, passed=3)).verdict == "passed"
    assert job_outcome("running", JobTally(expected=3, passed=1, running=1)).words == "running — 1 of 3 reported"
    assert job_outcome("cancelled", JobTally(expected=3)).words == "cancelled"
    assert job_outcome("failed", JobTally(expected=2)).words == "finished — only 0 of 2 reported"
    assert job_outcome("succeeded", JobTally(expected=2, passed=1, errored=1)).words == "finished — 1 of 2 errored"
    assert job_outcome("succeeded", JobTally(expected=2, passed=1, unevaluated=1)).verdict == "in_progress"
