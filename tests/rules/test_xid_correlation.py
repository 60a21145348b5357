"""The correlation rule: each window's events judged with the catalogue, their repeats and their job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet_rules.health_evidence import XidEvent
from fleet_rules.vocabulary import XidResolution
from fleet_rules.xid import XidKind
from fleet_rules.xid_catalogue import SXID_CATALOGUE, XID_CATALOGUE
from fleet_rules.xid_correlation import JobBurst, Thresholds, escalated, xid_judge

R = XidResolution
T0 = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
GPU = "0000:3b:00"


def xid(code: int, at: datetime | None = T0, *, gpu: str | None = GPU, kind: XidKind = XidKind.XID) -> XidEvent:
    return XidEvent(kind, code, gpu, "ignored text from the machine", at)


# --- the table of cases ---------------------------------------------------------------------------------------


def test_a_single_94_asks_only_for_the_application_to_restart() -> None:
    judged = xid_judge(window=[xid(94)])

    assert judged.step is R.RESTART_APP
    assert judged.reason == f"Xid 94 (Contained memory error) on GPU {GPU}: application restart asked"


def test_a_single_95_asks_for_a_gpu_reset_not_a_repair() -> None:
    judged = xid_judge(window=[xid(95)])

    assert judged.step is R.RESET_GPU
    assert judged.reason == f"Xid 95 (Uncontained memory error) on GPU {GPU}: GPU reset asked"


def test_a_95_repeated_on_the_same_gpu_within_24_h_escalates_one_step_to_a_reboot() -> None:
    judged = xid_judge(window=[xid(95, T0 + timedelta(hours=3))], history=[[xid(95)]], now=T0 + timedelta(hours=3))

    assert judged.step is R.REBOOT
    assert judged.reason == f"Xid 95 (Uncontained memory error) on GPU {GPU}: GPU reset asked; 2nd in 24 h: reboot"


def test_repeated_95s_in_one_window_escalate_but_the_lines_of_one_fault_count_once() -> None:
    one_fault = [xid(95, T0), xid(95, T0 + timedelta(seconds=1)), xid(95, T0 + timedelta(seconds=2))]
    two_faults = [xid(95, T0), xid(95, T0 + timedelta(minutes=20))]

    assert xid_judge(window=one_fault).step is R.RESET_GPU
    assert xid_judge(window=two_faults).step is R.REBOOT


def test_a_95_on_another_gpu_or_older_than_the_window_is_not_a_repeat() -> None:
    other_gpu = xid_judge(window=[xid(95, T0 + timedelta(hours=1))], history=[[xid(95, gpu="0000:5e:00")]])
    long_ago = xid_judge(window=[xid(95, T0 + timedelta(hours=30))], history=[[xid(95)]], now=T0 + timedelta(hours=30))

    assert other_gpu.step is R.RESET_GPU and long_ago.step is R.RESET_GPU


def test_a_third_95_after_a_reset_and_a_reboot_still_escalates_only_one_step() -> None:
    # the ladder (fleet_rules.remediation_ladder) is what turns "already reset and rebooted" into a repair
    judged = xid_judge(
        window=[xid(95, T0 + timedelta(hours=2))], history=[[xid(95)], [xid(95, T0 + timedelta(hours=1))]]
    )

    assert judged.step is R.REBOOT and "3rd in 24 h" in judged.reason


def test_a_77_node_burst_from_one_job_is_the_workloads_and_moves_no_device() -> None:
    burst = JobBurst(devices=80, logged_by={(XidKind.XID, 13): 77, (XidKind.XID, 95): 77})

    judged = xid_judge(window=[xid(13), xid(95)], job=burst)

    assert judged.step is R.NONE
    assert judged.workload_devices == 77
    assert judged.workload_reason == "the workload crashed on 77 devices (Xid 13, Xid 95)"
    assert "logged by 77 of the job's 80 devices at once: the workload's, nothing asked" in judged.reason


def test_a_code_few_devices_of_the_job_logged_is_each_devices_own() -> None:
    few = JobBurst(devices=80, logged_by={(XidKind.XID, 95): 2})
    minority = JobBurst(devices=80, logged_by={(XidKind.XID, 95): 30})

    assert xid_judge(window=[xid(95)], job=few).step is R.RESET_GPU
    assert xid_judge(window=[xid(95)], job=minority).step is R.RESET_GPU


def test_a_79_asks_for_a_reboot() -> None:
    judged = xid_judge(window=[xid(79)])

    assert judged.step is R.REBOOT
    assert judged.reason == f"Xid 79 (GPU has fallen off the bus) on GPU {GPU}: reboot asked"


def test_an_sxid_always_fatal_to_the_fabric_asks_for_a_reboot_and_a_non_fatal_one_for_nothing() -> None:
    halt = xid_judge(window=[xid(22003, kind=XidKind.SXID, gpu="0000:05:00.0")])
    replay = xid_judge(window=[xid(20001, kind=XidKind.SXID)])

    assert halt.step is R.REBOOT and halt.reason.startswith("SXid 22003 (Minion Halt) on GPU 0000:05:00.0")
    assert replay.step is R.NONE


def test_a_code_a_person_must_act_on_goes_to_repair_even_in_a_burst() -> None:
    burst = JobBurst(devices=10, logged_by={(XidKind.XID, 54): 10})

    judged = xid_judge(window=[xid(54)], job=burst)

    assert judged.step is R.REPAIR and judged.workload_devices == 0


def test_the_strongest_code_decides_and_every_code_explains_itself() -> None:
    judged = xid_judge(window=[xid(13), xid(79, T0 + timedelta(minutes=5))])

    assert judged.step is R.REBOOT
    assert judged.deciding is not None and judged.deciding.event.code == 79
    assert judged.reason.index("Xid 79") < judged.reason.index("Xid 13")


def test_the_logged_text_never_reaches_the_reason() -> None:
    assert "ignored text" not in xid_judge(window=[xid(95), xid(12345)]).reason


def test_an_informational_code_stays_informational_however_often_it_repeats() -> None:
    lines = [xid(92, T0 + timedelta(hours=h)) for h in range(5)]
    assert xid_judge(window=lines).step is R.NONE


def test_the_thresholds_are_configurable() -> None:
    strict = Thresholds(repeat_count=3)

    assert xid_judge(window=[xid(95, T0 + timedelta(hours=1))], history=[[xid(95)]], thresholds=strict).step is (
        R.RESET_GPU
    )


@pytest.mark.parametrize(
    ("step", "up"),
    [
        (R.NONE, R.NONE),
        (R.RESTART_APP, R.RESET_GPU),
        (R.RESET_GPU, R.REBOOT),
        (R.REBOOT, R.REPAIR),
        (R.REPAIR, R.REPAIR),
    ],
)
def test_escalation_is_one_step(step: XidResolution, up: XidResolution) -> None:
    assert escalated(step) is up


# --- the property -----------------------------------------------------------------------------------------------

RECOVERABLE = sorted(
    [(XidKind.XID, c) for c, e in XID_CATALOGUE.items() if e.recoverable]
    + [(XidKind.SXID, c) for c, e in SXID_CATALOGUE.items() if e.recoverable]
)


@given(
    code=st.sampled_from(RECOVERABLE),
    lines=st.integers(min_value=1, max_value=20),
    spread=st.integers(min_value=0, max_value=59),
    untimed=st.booleans(),
    devices=st.integers(min_value=1, max_value=200),
    peers=st.integers(min_value=0, max_value=200),
)
def test_no_recoverable_code_alone_ever_sends_a_device_to_repair(
    code: tuple[XidKind, int], lines: int, spread: int, untimed: bool, devices: int, peers: int
) -> None:
    kind, number = code
    # one occurrence: however many lines, all within the same minute (or all untimed)
    window = [
        xid(number, None if untimed else T0 + timedelta(seconds=spread * i / max(lines, 1)), kind=kind)
        for i in range(lines)
    ]
    job = JobBurst(devices=devices, logged_by={code: min(peers, devices)}) if devices > 1 else None

    judged = xid_judge(window=window, job=job)

    assert judged.step is not R.REPAIR
    assert judged.reason  # and it says why
