"""Explicit builders for test data: each call creates exactly what it names."""

from __future__ import annotations

from itertools import count
from uuid import UUID, uuid4

from django.utils import timezone

from fleet.inventory.models import Device, Satellite, Site, Topology, TopologyMembership
from fleet.policies.models import AcceptancePolicy, ParameterProfile, Requirement, ThresholdRule
from tests.payloads import failing_payload, passing_payload

__all__ = ["FleetBuilder", "failing_payload", "passing_payload", "result_item"]
from fleet_rules.vocabulary import DeviceState

_seq = count(1)


class FleetBuilder:
    def site(self, slug: str | None = None, name: str | None = None) -> Site:
        slug = slug or f"site-{next(_seq)}"
        return Site.objects.create(slug=slug, name=name or slug.upper())

    def satellite(self, site: Site, name: str | None = None, workflows: list[str] | None = None) -> Satellite:
        advertised = [{"name": w, "version": "1"} for w in (workflows or [])]
        return Satellite.objects.create(site=site, name=name or f"sat-{next(_seq)}", advertised_workflows=advertised)

    def topology(self, satellite: Satellite, unit: str = "rack", label: str | None = None) -> Topology:
        return Topology.objects.create(
            site=satellite.site, satellite=satellite, unit=unit, label=label or f"{unit}-{next(_seq)}"
        )

    def device(
        self,
        satellite: Satellite,
        resource_class: str = "gpu.h200.8x",
        *,
        hostname: str | None = None,
        state: str = DeviceState.BURN_IN,
        enrolled: bool = True,
        topologies: list[Topology] = (),
    ) -> Device:
        device = Device.objects.create(
            site=satellite.site,
            satellite=satellite,
            hostname=hostname or f"node-{next(_seq):04d}",
            serial=f"SN{next(_seq):06d}",
            resource_class=resource_class,
            state=state,
            enrolled_at=timezone.now() if enrolled else None,
        )
        for topology in topologies:
            TopologyMembership.objects.create(device=device, topology=topology, unit=topology.unit)
        return device

    def policy(
        self, resource_class: str = "gpu.h200.8x", version: int = 1, *, auto_accept: bool = True
    ) -> AcceptancePolicy:
        return AcceptancePolicy.objects.create(resource_class=resource_class, version=version, auto_accept=auto_accept)

    def requirement(
        self,
        policy: AcceptancePolicy,
        name: str | None = None,
        *,
        gate: str = "burn-in",
        scope: str = "single_node",
        unit: str | None = None,
        test: str = "dcgm-diag",
        rerunnable: bool = True,
        parameter_constraints: dict | None = None,
        thresholds: list[dict] | None = None,
        retired: bool = False,
        consecutive_passes: int = 1,
        outlier_k: float | None = None,
    ) -> Requirement:
        if scope == "multi_node":
            gate, unit = "rack-acceptance", unit or "rack"
        requirement = Requirement.objects.create(
            policy=policy,
            name=name or f"req-{next(_seq)}",
            gate=gate,
            scope=scope,
            unit=unit,
            test=test,
            rerunnable=rerunnable,
            parameter_constraints=parameter_constraints or {},
            retired_at=timezone.now() if retired else None,
            consecutive_passes=consecutive_passes,
            outlier_k=outlier_k,
        )
        for rule in (
            thresholds
            if thresholds is not None
            else [{"metric": "diag_failed_tests", "comparator": "eq", "threshold": 0}]
        ):
            ThresholdRule.objects.create(requirement=requirement, **rule)
        return requirement

    def profile(self, resource_class: str, test: str, parameters: dict, name: str = "default") -> ParameterProfile:
        return ParameterProfile.objects.create(
            resource_class=resource_class, test=test, name=name, parameters=parameters
        )

    # --- burn-in evidence ---------------------------------------------------------------------

    def execution(
        self,
        requirement: Requirement,
        *,
        device: Device | None = None,
        topology: Topology | None = None,
        status: str = "completed",
        metrics: dict | None = None,
        job=None,
        execution_id: UUID | None = None,
        error: str = "",
        health: dict | None = None,
        inventory: dict | None = None,
    ):
        """Report an execution through the service, as an agent would (`health` as the API
        stores it: JSON, times as ISO 8601 strings)."""
        from fleet.burnin.executions import ExecutionReport, execution_report

        now = timezone.now()
        report = ExecutionReport(
            requirement=requirement.name,
            test=None,
            device_id=device.id if device else None,
            topology_id=topology.id if topology else None,
            job_id=job.id if job else None,
            status=status,
            parameters={},
            metrics=metrics if metrics is not None else {"diag_failed_tests": {"value": 0}},
            error=error,
            started_at=now,
            finished_at=None if status == "running" else now,
            health=health,
            inventory=inventory,
        )
        return execution_report(
            execution_id=execution_id or uuid4(), report=report, actor=None, reported_by="test"
        ).execution

    def source_key(self, requirement: Requirement, site: Site) -> str:
        from fleet.policies.selectors import load_resolutions

        return load_resolutions([(requirement.id, site.id)])[(requirement.id, site.id)].key


def result_item(execution, key: str, payload: dict | None = None, expected_updated_at=None) -> dict:
    """One item of the upsert request, as an agent would post it."""
    return {
        "execution_id": str(execution.id),
        "evaluation_result": payload or passing_payload(),
        "evaluation_source_key": key,
        "expected_updated_at": (expected_updated_at or execution.updated_at).isoformat(),
    }
