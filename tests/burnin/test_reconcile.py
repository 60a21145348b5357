"""POST /api/v1/burn-in/policy-progress/reconcile/: sweeps, guarded cleanup, concurrency."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.burnin.evaluation_results.service import evaluation_results_upsert
from fleet.burnin.models import EvaluationResult, PolicyProgress, ReconcileSweep, TestExecution
from fleet.burnin.reconcile import service as reconcile_service
from fleet.inventory.models import Device
from fleet.policies.models import ThresholdRule
from fleet_rules.evaluations import ResultItem
from tests.builders import FleetBuilder, failing_payload, passing_payload, result_item
from tests.burnin.sweeps import RECONCILE, expected_projection, projection, sweep_api, sweep_service
from tests.support.hypothesis_profiles import examples

SCOPE = ["burn-in-policy-progress:write"]
BODY = {"site_slug": "lon-1", "satellite_name": "sat-a", "resource_class": "gpu.h200.8x"}


def evaluate(execution, requirement, site, passed=True, at=None):
    """Materialise an evaluation through the upsert service, as phase 1 would."""
    key = FleetBuilder().source_key(requirement, site)
    payload = passing_payload() if passed else failing_payload()
    counts = evaluation_results_upsert(
        items=[ResultItem(execution.id, payload, key, at or execution.updated_at)], actor=None
    )
    assert counts.written == 1


# --- property: any page size gives the projection a from-scratch recomputation gives -------------


@st.composite
def small_fleets(draw):
    return {
        "devices": draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["sat-a", "sat-b"]),
                    st.sampled_from(["gpu.h200.8x", "gpu.gb200.nvl72"]),
                    st.sampled_from(["burn_in", "staged", "accepted", "decommissioned"]),
                    st.booleans(),  # enrolled
                    st.integers(-1, 1),  # rack index (-1: none)
                ),
                max_size=7,
            )
        ),
        "racks": draw(st.lists(st.sampled_from(["sat-a", "sat-b"]), min_size=2, max_size=2)),
        "requirements": draw(
            st.lists(
                # gate, retired, consecutive_passes
                st.tuples(st.sampled_from(["burn-in", "extended"]), st.booleans(), st.integers(1, 3)),
                min_size=0,
                max_size=3,
            )
        ),
        "with_rack_requirement": draw(st.booleans()),
        "rack_consecutive_passes": draw(st.integers(1, 3)),
        # When the policy's version last changed, in evidence steps (-1: never).
        "version_changed_step": draw(st.integers(-1, 10)),
        "evidence": draw(
            st.lists(
                st.tuples(
                    st.integers(0, 5),  # which target (few, so targets get several runs)
                    # Weighted towards judged passes, so consecutive_passes > 1 meets streaks.
                    st.sampled_from(["running", "completed", "completed", "errored"]),
                    st.sampled_from(
                        [
                            "none",
                            "current_pass",
                            "current_pass",
                            "current_pass",
                            "current_fail",
                            "old_key",
                            "old_update",
                        ]
                    ),
                ),
                max_size=14,
            )
        ),
    }


def build(spec):
    fleet = FleetBuilder()
    site = fleet.site("lon-1")
    sats = {"sat-a": fleet.satellite(site, "sat-a"), "sat-b": fleet.satellite(site, "sat-b")}
    racks = [fleet.topology(sats[s], "rack", f"rack-{i}") for i, s in enumerate(spec["racks"])]
    for satellite, rc, state, enrolled, rack in spec["devices"]:
        fleet.device(sats[satellite], rc, state=state, enrolled=enrolled, topologies=[racks[rack]] if rack >= 0 else [])
    policy = fleet.policy("gpu.h200.8x", version=4)
    base = timezone.now()
    if spec["version_changed_step"] >= 0:
        policy.version_changed_at = base + timedelta(seconds=spec["version_changed_step"])
        policy.save(update_fields=["version_changed_at"])
    requirements = [
        fleet.requirement(policy, f"req-{i}", gate=gate, retired=retired, consecutive_passes=k)
        for i, (gate, retired, k) in enumerate(spec["requirements"])
    ]
    if spec["with_rack_requirement"]:
        requirements.append(
            fleet.requirement(
                policy, "rack-nccl", scope="multi_node", unit="rack", consecutive_passes=spec["rack_consecutive_passes"]
            )
        )
    targets = [(r, d, None) for r in requirements if r.scope == "single_node" for d in Device.objects.all()]
    targets += [(r, None, t) for r in requirements if r.scope == "multi_node" for t in racks]
    for step, (index, status, evaluation) in enumerate(spec["evidence"]):
        if not targets:
            break
        requirement, device, topology = targets[index % len(targets)]
        at = base + timedelta(seconds=step)
        execution = TestExecution.objects.create(
            id=uuid.uuid4(),
            site=site,
            requirement=requirement,
            test="t",
            device=device,
            topology=topology,
            status=status,
            created_at=at,
            updated_at=at,
        )
        if evaluation != "none":
            key = fleet.source_key(requirement, site)
            EvaluationResult.objects.create(
                execution=execution,
                passed=evaluation != "current_fail",
                metric_evaluations={},
                evaluation_source_key="0" * 64 if evaluation == "old_key" else key,
                execution_updated_at=at - timedelta(microseconds=1) if evaluation == "old_update" else at,
                materialised_at=at + timedelta(milliseconds=1),
            )
    return site, sats["sat-a"], policy


@pytest.mark.slow
@pytest.mark.django_db
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=small_fleets())
def test_any_page_size_gives_the_from_scratch_projection(spec):
    with transaction.atomic():
        site, satellite, policy = build(spec)
        expected, target_count = expected_projection(site, satellite, "gpu.h200.8x", policy)
        for limit in [1, 2, 3, 4, 5, 6, 7, 500]:
            PolicyProgress.objects.all().delete()
            pages = sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=limit)
            assert projection() == expected, limit
            assert {p.target_count for p in pages} == {target_count}
            assert sum(p.written + p.unchanged + p.deferred for p in pages) == target_count
            assert sum(p.written for p in pages) == len(expected)
            assert len(pages) == max(1, -(-target_count // limit))
        again = sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=3)
        assert sum(p.written for p in again) == 0
        assert sum(p.unchanged for p in again) == len(expected)
        transaction.set_rollback(True)


@st.composite
def histories(draw):
    """A few targets with long histories, so `consecutive_passes` meets every kind of streak."""
    spec = draw(small_fleets())
    spec["devices"] = [("sat-a", "gpu.h200.8x", "burn_in", True, draw(st.integers(-1, 1))) for _ in range(2)]
    spec["requirements"] = [("burn-in", False, draw(st.integers(2, 3)))]
    spec["with_rack_requirement"] = True
    spec["racks"] = ["sat-a", "sat-a"]
    return spec


@pytest.mark.slow
@pytest.mark.django_db
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=histories())
def test_consecutive_passes_give_the_from_scratch_projection(spec):
    with transaction.atomic():
        site, satellite, policy = build(spec)
        expected, _ = expected_projection(site, satellite, "gpu.h200.8x", policy)
        for limit in [1, 3, 500]:
            PolicyProgress.objects.all().delete()
            sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=limit)
            assert projection() == expected, limit
        transaction.set_rollback(True)


# --- the API ----------------------------------------------------------------------------------


@pytest.fixture
def rack_fleet(fleet):
    site = fleet.site("lon-1")
    sat_a, sat_b = fleet.satellite(site, "sat-a"), fleet.satellite(site, "sat-b")
    racks = [fleet.topology(sat_a, "rack", f"rack-a0{i}") for i in range(2)]
    devices = [fleet.device(sat_a, topologies=[racks[i % 2]], hostname=f"a-n{i:02d}") for i in range(8)]
    fleet.device(sat_b)
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag", test="dcgm-diag")
    extra = fleet.requirement(policy, "nvbandwidth", gate="extended", test="nvbandwidth")
    rack = fleet.requirement(policy, "rack-nccl", scope="multi_node", unit="rack")
    return site, sat_a, racks, devices, policy, diag, extra, rack


def test_a_sweep_writes_every_target_then_finds_them_unchanged(bearer, rack_fleet, fleet):
    site, _, racks, devices, _, diag, _, rack = rack_fleet
    evaluate(fleet.execution(diag, device=devices[0]), diag, site)
    fleet.execution(diag, device=devices[1], status="running")
    fleet.execution(diag, device=devices[2])  # not evaluated yet: deferred
    evaluate(fleet.execution(rack, topology=racks[0], metrics={}), rack, site, passed=False)
    client = bearer(SCOPE)
    pages = sweep_api(client, BODY | {"limit": 5})
    assert [p["target_count"] for p in pages] == [18] * 4
    totals = {k: sum(p[k] for p in pages) for k in ("written", "unchanged", "deferred", "deleted")}
    assert totals == {"written": 17, "unchanged": 0, "deferred": 1, "deleted": 0}
    verdicts = dict(PolicyProgress.objects.values_list("target_id", "verdict").filter(requirement=diag))
    assert (verdicts[devices[0].id], verdicts[devices[1].id], verdicts.get(devices[2].id)) == (
        "passed",
        "in_progress",
        None,
    )
    assert PolicyProgress.objects.get(requirement=rack, topology=racks[0]).verdict == "failed"
    first_record = ReconcileSweep.objects.get(satellite__name="sat-a", resource_class="gpu.h200.8x", gate=None)
    assert (first_record.target_count, first_record.written, first_record.deferred) == (18, 17, 1)
    rows_before = {row.id: row.reconciled_at for row in PolicyProgress.objects.all()}
    again = sweep_api(client, BODY)
    assert (again[0]["written"], again[0]["unchanged"], again[0]["deferred"]) == (0, 17, 1)
    # Steady state writes nothing: the rows are untouched, the scope's sweep record moves on.
    assert {row.id: row.reconciled_at for row in PolicyProgress.objects.all()} == rows_before
    record = ReconcileSweep.objects.get(pk=first_record.pk)
    assert record.completed_at > first_record.completed_at
    assert (record.written, record.unchanged, record.deferred, record.deleted) == (0, 17, 1, 0)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"site_slug": "nowhere"}, "site_slug"),
        ({"site_slug": "bad slug"}, "site_slug"),
        ({"satellite_name": "sat-z"}, "satellite_name"),
        ({"resource_class": "gpu.unknown"}, "resource_class"),
        ({"gate": "Bad Gate"}, "gate"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"cursor": "garbage"}, "cursor"),
    ],
)
def test_scope_and_paging_errors_name_the_field(bearer, rack_fleet, override, field):
    response = bearer(SCOPE).post(RECONCILE, BODY | override, format="json")
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["field_errors"]] == [field]
    assert PolicyProgress.objects.count() == 0


def test_form_bodies_work_for_this_flat_request(bearer, rack_fleet):
    response = bearer(SCOPE).post(RECONCILE, BODY | {"limit": "50"}, format="multipart")
    assert response.status_code == 200 and response.json()["target_count"] == 18


def test_a_satellite_token_reconciles_only_its_own_scope(bearer, rack_fleet):
    _, sat_a, *_ = rack_fleet
    client = bearer(SCOPE, satellite=sat_a)
    assert client.post(RECONCILE, BODY, format="json").status_code == 200
    other = client.post(RECONCILE, BODY | {"satellite_name": "sat-b"}, format="json")
    assert other.status_code == 403 and other.json()["code"] == "permission_denied"


def test_a_policy_that_governs_nothing_reports_target_count_zero(bearer, fleet, caplog):
    site = fleet.site("lon-1")
    fleet.satellite(site, "sat-a")
    fleet.requirement(fleet.policy("gpu.h200.8x"), "gpu-diag")
    with caplog.at_level(logging.WARNING, logger="fleet.reconcile"):
        response = bearer(SCOPE).post(RECONCILE, BODY, format="json")
    assert response.status_code == 200
    assert response.json() == {
        "written": 0,
        "unchanged": 0,
        "deferred": 0,
        "deleted": 0,
        "guard_tripped": False,
        "next_cursor": None,
        "target_count": 0,
    }
    assert "governs no target" in caplog.text


def test_a_policy_change_mid_sweep_refuses_the_cursor_and_a_restart_succeeds(bearer, rack_fleet):
    *_, policy, diag, _, _ = rack_fleet
    client = bearer(SCOPE)
    first = client.post(RECONCILE, BODY | {"limit": 4}, format="json").json()
    ThresholdRule.objects.filter(requirement=diag).update(threshold=1)
    policy.version += 1
    policy.save()
    refused = client.post(RECONCILE, BODY | {"limit": 4, "cursor": first["next_cursor"]}, format="json")
    assert refused.status_code == 400
    error = refused.json()["field_errors"][0]
    assert error["field"] == "cursor" and "Restart the sweep" in error["messages"][0]
    pages = sweep_api(client, BODY | {"limit": 4})
    assert pages[-1]["next_cursor"] is None
    assert set(PolicyProgress.objects.values_list("policy_version", flat=True)) == {2}


def test_a_cursor_is_bound_to_its_scope_and_cannot_be_edited(bearer, rack_fleet):
    client = bearer(SCOPE)
    cursor = client.post(RECONCILE, BODY | {"limit": 2}, format="json").json()["next_cursor"]
    other_gate = client.post(RECONCILE, BODY | {"gate": "burn-in", "cursor": cursor}, format="json")
    assert other_gate.status_code == 400 and other_gate.json()["field_errors"][0]["field"] == "cursor"
    tampered = client.post(RECONCILE, BODY | {"cursor": cursor[:-3] + "abc"}, format="json")
    assert tampered.status_code == 400 and tampered.json()["field_errors"][0]["field"] == "cursor"


def test_decommissioning_more_than_the_guard_allows_keeps_the_rows(bearer, rack_fleet, settings, caplog):
    settings.FLEET = settings.FLEET | {"RECONCILE_GUARD_ABSOLUTE": 2, "RECONCILE_GUARD_RATIO": 0.1}
    *_, devices, _, diag, _, _ = rack_fleet
    client = bearer(SCOPE)
    sweep_api(client, BODY)
    rows = PolicyProgress.objects.count()
    Device.objects.filter(id__in=[d.id for d in devices[:3]]).update(state="decommissioned")
    with caplog.at_level(logging.WARNING, logger="fleet.reconcile"):
        last = sweep_api(client, BODY)[-1]
    assert (last["guard_tripped"], last["deleted"]) == (True, 0)
    assert PolicyProgress.objects.count() == rows
    assert "guard tripped for lon-1/sat-a / gpu.h200.8x" in caplog.text and "6 of 18" in caplog.text


def test_decommissioning_fewer_than_the_guard_allows_deletes_their_rows(bearer, rack_fleet, settings):
    settings.FLEET = settings.FLEET | {"RECONCILE_GUARD_ABSOLUTE": 2, "RECONCILE_GUARD_RATIO": 0.1}
    *_, devices, _, diag, _, _ = rack_fleet
    client = bearer(SCOPE)
    sweep_api(client, BODY)
    Device.objects.filter(id=devices[0].id).update(state="decommissioned")
    last = sweep_api(client, BODY)[-1]
    assert (last["guard_tripped"], last["deleted"]) == (False, 2)
    assert not PolicyProgress.objects.filter(device=devices[0]).exists()


def test_retired_requirement_rows_go_even_when_the_guard_trips(bearer, rack_fleet, settings):
    settings.FLEET = settings.FLEET | {"RECONCILE_GUARD_ABSOLUTE": 1, "RECONCILE_GUARD_RATIO": 0.0}
    *_, devices, _, diag, extra, _ = rack_fleet
    client = bearer(SCOPE)
    sweep_api(client, BODY)
    extra.retired_at = timezone.now()
    extra.save()
    Device.objects.filter(id__in=[d.id for d in devices[:2]]).update(enrolled_at=None)
    last = sweep_api(client, BODY)[-1]
    assert last["guard_tripped"] is True
    assert last["deleted"] == 8
    assert not PolicyProgress.objects.filter(requirement=extra).exists()
    assert PolicyProgress.objects.filter(device=devices[0]).count() == 1  # kept by the guard


def test_a_gate_scoped_sweep_never_touches_other_gates_rows(bearer, rack_fleet):
    *_, devices, _, diag, extra, rack = rack_fleet
    client = bearer(SCOPE)
    sweep_api(client, BODY)
    before = {row.id: row.reconciled_at for row in PolicyProgress.objects.exclude(gate="extended")}
    Device.objects.filter(id=devices[0].id).update(state="decommissioned")
    pages = sweep_api(client, BODY | {"gate": "extended"})
    assert pages[0]["target_count"] == 7
    assert pages[-1]["deleted"] == 1
    after = {row.id: row.reconciled_at for row in PolicyProgress.objects.exclude(gate="extended")}
    assert after == before
    assert PolicyProgress.objects.filter(device=devices[0], requirement=diag).exists()


def test_query_count_per_page_is_the_same_at_limit_10_and_500(bearer, fleet):
    """A page's queries depend on where it is (first, middle, last) and whether it wrote (a page
    that wrote nothing skips its upsert and certificate issuance's four statements), never on its
    limit."""
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    rack = fleet.topology(satellite, "rack", "r1")
    devices = [fleet.device(satellite, topologies=[rack]) for _ in range(260)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    fleet.requirement(policy, "other", gate="extended")
    for device in devices[:40]:
        evaluate(fleet.execution(diag, device=device), diag, site)
    client = bearer(SCOPE)
    client.post(RECONCILE, BODY | {"limit": 1}, format="json")
    counts: dict[tuple[str, bool], set[int]] = defaultdict(set)

    def page(limit, cursor=None, where="middle"):
        with CaptureQueriesContext(connection) as queries:
            response = client.post(RECONCILE, BODY | {"limit": limit, "cursor": cursor}, format="json")
        assert response.status_code == 200
        body = response.json()
        where = "last" if body["next_cursor"] is None else where
        counts[(where, body["written"] > 0)].add(len(queries))
        return body

    small = page(10, where="first")
    large = page(500, where="first")  # rewrites what the first page wrote, and 490 more
    assert small["next_cursor"] and large["next_cursor"] and small["target_count"] == 520
    cursor = small["next_cursor"]
    for _ in range(60):  # over the 490 the large page wrote (nothing to write), then 20 new ones
        cursor = page(10, cursor)["next_cursor"]
        if cursor is None:
            break
    assert cursor is None
    assert page(500, large["next_cursor"])["next_cursor"] is None  # the 20 the small pages wrote
    assert set(counts) == {
        ("first", True),
        ("middle", False),
        ("middle", True),
        ("last", True),
        ("last", False),
    }
    assert all(len(seen) == 1 for seen in counts.values()), counts
    for where in ("middle", "last"):
        (wrote,), (idle,) = counts[(where, True)], counts[(where, False)]
        assert wrote - idle == 5  # the upsert, and certificate issuance's four statements


# --- concurrency ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_sweeps_interleaved_with_evaluation_writes_end_as_a_sequential_sweep(fleet, monkeypatch):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    devices = [fleet.device(satellite) for _ in range(10)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    old = [fleet.execution(diag, device=d) for d in devices]
    for execution in old:
        evaluate(execution, diag, site, passed=True)

    original = reconcile_service.page_write
    loaded, resume = threading.Event(), threading.Event()

    def slow_first_page(scope, rows, **marks):
        if threading.current_thread().name == "A" and not loaded.is_set():
            loaded.set()
            assert resume.wait(20)
        return original(scope, rows, **marks)

    monkeypatch.setattr(reconcile_service, "page_write", slow_first_page)
    results = {}

    def run(name, limit):
        try:
            results[name] = sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=limit)
        finally:
            connections.close_all()

    a = threading.Thread(target=run, name="A", args=("A", 4))
    a.start()
    assert loaded.wait(20)  # A has read page 1 (devices 0-3 passed) but not written it
    for device in devices:
        newer = fleet.execution(diag, device=device)  # a rerun...
        evaluate(newer, diag, site, passed=False)  # ...that failed
    b = threading.Thread(target=run, name="B", args=("B", 3))
    b.start()
    b.join(30)
    resume.set()
    a.join(30)
    assert not a.is_alive() and not b.is_alive()
    concurrent = projection()
    assert {verdict for verdict, *_ in concurrent.values()} == {"failed"}
    assert sum(p.written for p in results["B"]) == 10
    assert sum(p.written for p in results["A"][:1]) == 0  # its stale first page lost to B's fresher rows

    PolicyProgress.objects.all().delete()
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    assert projection() == concurrent


@pytest.mark.django_db(transaction=True)
def test_free_running_concurrent_sweeps_agree_with_a_sequential_one(fleet):
    site = fleet.site("lon-1")
    satellite = fleet.satellite(site, "sat-a")
    devices = [fleet.device(satellite) for _ in range(12)]
    policy = fleet.policy("gpu.h200.8x")
    diag = fleet.requirement(policy, "gpu-diag")
    for i, device in enumerate(devices):
        execution = fleet.execution(diag, device=device, status="running" if i % 4 == 0 else "completed")
        if i % 4:
            evaluate(execution, diag, site, passed=i % 3 != 0)
    errors = []

    def run(limit):
        try:
            sweep_service("lon-1", "sat-a", "gpu.h200.8x", limit=limit)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(limit,)) for limit in (1, 2, 3, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    concurrent = projection()
    PolicyProgress.objects.all().delete()
    sweep_service("lon-1", "sat-a", "gpu.h200.8x")
    assert projection() == concurrent and len(concurrent) == 12


def test_result_item_helper_matches_the_api(bearer, rack_fleet, fleet):
    site, _, _, devices, _, diag, _, _ = rack_fleet
    execution = fleet.execution(diag, device=devices[0])
    response = bearer(["test-execution:evaluate"]).post(
        "/api/v1/burn-in/evaluations/results/",
        {"results": [result_item(execution, fleet.source_key(diag, site))]},
        format="json",
    )
    assert response.json()["written"] == 1


def test_rows_of_a_requirement_whose_unit_changed_go_even_when_the_guard_trips(bearer, rack_fleet, fleet, settings):
    settings.FLEET = settings.FLEET | {"RECONCILE_GUARD_ABSOLUTE": 0, "RECONCILE_GUARD_RATIO": 0.0}
    site, sat_a, racks, devices, policy, diag, extra, rack = rack_fleet
    client = bearer(SCOPE)
    sweep_api(client, BODY)
    assert PolicyProgress.objects.filter(requirement=rack).count() == 2
    pods = fleet.topology(sat_a, "pod", "pod-1")
    from fleet.inventory.models import TopologyMembership

    for device in devices:
        TopologyMembership.objects.create(device=device, topology=pods, unit="pod")
    rack.unit = "pod"
    rack.save()
    policy.version += 1
    policy.save()
    last = sweep_api(client, BODY)[-1]
    assert last["deleted"] == 2 and last["guard_tripped"] is False
    assert list(PolicyProgress.objects.filter(requirement=rack).values_list("topology__label", flat=True)) == ["pod-1"]
