"""The remediation ladder: a reset, then a reboot, then a repair; nothing new while a step is under way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_rules.remediation_ladder import LadderPolicy, TakenStep, device_ladder_next, ladder_next
from fleet_rules.vocabulary import RemedyOutcome, XidResolution

R = XidResolution
Outcome = RemedyOutcome
NOW = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)


def taken(step: XidResolution, hours_ago: float, outcome: RemedyOutcome = Outcome.PERSISTED) -> TakenStep:
    return TakenStep(step, NOW - timedelta(hours=hours_ago), outcome)


def test_a_first_reset_is_taken_not_a_repair() -> None:
    decision = ladder_next(asked=R.RESET_GPU, taken=[], now=NOW)

    assert decision.action is R.RESET_GPU and decision.reason == "GPU reset asked" and not decision.exhausted


def test_a_persisting_fault_after_a_reset_gets_a_reboot_then_a_repair_naming_the_ladder() -> None:
    after_reset = ladder_next(asked=R.RESET_GPU, taken=[taken(R.RESET_GPU, 1)], now=NOW)
    after_reboot = ladder_next(asked=R.REBOOT, taken=[taken(R.RESET_GPU, 2), taken(R.REBOOT, 1)], now=NOW)

    assert after_reset.action is R.REBOOT
    assert after_reboot.action is R.REPAIR and after_reboot.exhausted
    assert after_reboot.reason == (
        "the ladder is exhausted in 24 h: GPU reset at 2026-12-03T13:00:00Z: persisted; "
        "reboot at 2026-12-03T14:00:00Z: persisted"
    )


def test_steps_older_than_the_window_are_forgotten() -> None:
    assert ladder_next(asked=R.RESET_GPU, taken=[taken(R.RESET_GPU, 30)], now=NOW).action is R.RESET_GPU


def test_a_reboot_asked_skips_the_reset() -> None:
    assert ladder_next(asked=R.REBOOT, taken=[], now=NOW).action is R.REBOOT


def test_nothing_more_is_asked_while_a_step_is_under_way_but_a_repair_is_not_held_back() -> None:
    under_way = [taken(R.RESET_GPU, 0.1, Outcome.UNDER_WAY)]
    decision = ladder_next(asked=R.REBOOT, taken=under_way, now=NOW)

    assert decision.action is R.NONE and decision.waiting
    assert ladder_next(asked=R.REPAIR, taken=under_way, now=NOW).action is R.REPAIR


def test_the_catalogue_asking_for_repair_goes_to_repair_at_once() -> None:
    decision = ladder_next(asked=R.REPAIR, taken=[], now=NOW)

    assert decision.action is R.REPAIR and not decision.exhausted and decision.reason == ""


def test_a_repair_a_repeat_asks_for_names_the_ladder_taken() -> None:
    decision = ladder_next(asked=R.REPAIR, taken=[taken(R.REBOOT, 1)], now=NOW)

    assert (
        decision.action is R.REPAIR and decision.reason == "the ladder taken: reboot at 2026-12-03T14:00:00Z: persisted"
    )


def test_what_the_ladder_does_not_handle_passes_through() -> None:
    assert ladder_next(asked=R.RESTART_APP, taken=[], now=NOW).action is R.RESTART_APP
    assert ladder_next(asked=R.NONE, taken=[], now=NOW).action is R.NONE


def test_the_allowance_is_configurable() -> None:
    two_resets = LadderPolicy(allowed={R.RESET_GPU: 2, R.REBOOT: 0})

    assert ladder_next(asked=R.RESET_GPU, taken=[taken(R.RESET_GPU, 1)], now=NOW, policy=two_resets).action is (
        R.RESET_GPU
    )
    assert ladder_next(
        asked=R.RESET_GPU, taken=[taken(R.RESET_GPU, 2), taken(R.RESET_GPU, 1)], now=NOW, policy=two_resets
    ).action is (R.REPAIR)


def test_a_step_asked_of_a_device_no_burn_in_job_can_hold_goes_to_repair_saying_why() -> None:
    def decided(state: str, asked: XidResolution = R.REBOOT, enrolled_at: datetime | None = NOW):
        return device_ladder_next(asked=asked, taken=[], now=NOW, enrolled_at=enrolled_at, state=state)

    accepted = decided("accepted")
    assert (
        accepted.action is R.REPAIR and accepted.reason == "reboot asked, but no burn-in job can hold a device accepted"
    )
    assert decided("burn_in").action is R.REBOOT and decided("burn_in", R.RESET_GPU).action is R.RESET_GPU
    assert decided("burn_in", enrolled_at=None).action is R.REPAIR  # not enrolled: no job can hold it either
    assert decided("accepted", R.RESTART_APP).action is R.RESTART_APP  # nothing the ladder takes: passes through
