"""Certificates at fleet scale: `python bench/certificates.py [--scale S ...]`.

For each scale, on the benchmark fleet (`bench/seed.py`: 5,000 devices and 30,625 targets per
unit of scale, 10 % of completed runs failing): a first reconcile sweep from an empty projection
(which issues the certificates of every device that passes everything) and a second one (all
unchanged), then `policy_what_if` for a candidate that loosens one threshold (its failing runs
flip to passed) and one that tightens another (every pass of it flips to failed): wall time,
statements, rows replayed, flips, certificates it would supersede, and the Python heap's peak
(tracemalloc, in a second run). Prints one JSON object per scale. Asserts nothing about speed.
Runs in a throwaway database, as `bench/run.py` does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from typing import Any

from run import _configure, bench_database, bench_key_publish


def _candidate(fleet: Any, changes: dict[str, float]) -> Any:
    from fleet.fleetfile.document import FleetDocument, PolicyDecl, RequirementDecl, ThresholdDecl

    requirements = []
    for spec in fleet.specs:
        r = spec.requirement
        threshold = changes.get(r.name, spec.threshold)
        requirements.append(
            RequirementDecl(
                name=r.name,
                gate=r.gate,
                scope=r.scope,
                unit=r.unit,
                test=r.test,
                rerunnable=r.rerunnable,
                parameter_constraints=r.parameter_constraints,
                retired=False,
                thresholds=[ThresholdDecl(spec.metric, None, spec.comparator, threshold)],
            )
        )
    return FleetDocument(policies=[PolicyDecl(fleet.policy.resource_class, "", requirements)])


def _measure(scale: float) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.seed import evaluations_materialise, fleet_build
    from fleet.burnin.models import AcceptanceCertificate
    from fleet.burnin.reconcile.service import reconcile_sweep
    from fleet.fleetfile.whatif import policy_what_if

    fleet = fleet_build(scale=scale)
    evaluations_materialise(fleet)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    result: dict[str, Any] = {"scale": scale, "devices": len(fleet.device_ids)}

    def sweep() -> Any:
        return reconcile_sweep(
            site_slug=fleet.site.slug, satellite_name=fleet.satellite.name, resource_class=fleet.policy.resource_class
        )

    started = time.perf_counter()
    totals = sweep()
    result["first_sweep_s"] = round(time.perf_counter() - started, 2)
    result["targets"] = totals.target_count
    result["certificates_issued"] = AcceptanceCertificate.objects.count()
    started = time.perf_counter()
    sweep()
    result["steady_sweep_s"] = round(time.perf_counter() - started, 2)

    candidates = {
        "loosen_gpu_memory_bandwidth": {"gpu-memory-bandwidth": 2700},  # the failing 2,710 GB/s runs pass
        "tighten_pcie_bandwidth": {"pcie-bandwidth": 60},  # every 54.2 GB/s pass fails
    }
    for name, changes in candidates.items():
        document = _candidate(fleet, changes)
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            what = policy_what_if(document=document)
            seconds = time.perf_counter() - started
        tracemalloc.start()
        policy_what_if(document=document)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result[name] = {
            "seconds": round(seconds, 2),
            "statements": len(queries),
            "replayed": what.replayed,
            "flips": len(what.flips),
            "certificates_superseded": what.certificates_superseded,
            "python_peak_mb": round(peak / 2**20, 1),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, action="append", help="Fleet scale (repeatable; default 0.33 and 3.3).")
    args = parser.parse_args(argv)
    _configure()
    import django

    django.setup()
    from django.db import connection

    with bench_database():
        for scale in args.scale or [0.33, 3.3]:
            with connection.cursor() as cursor:
                cursor.execute(
                    "TRUNCATE burnin_acceptancecertificate, burnin_certificatekey, burnin_policyprogress, "
                    "burnin_reconcilesweep, burnin_evaluationresult, burnin_testexecution, jobs_jobdevice, jobs_job, "
                    "inventory_topologymembership, inventory_device, inventory_topology, inventory_satellite, "
                    "inventory_site, policies_thresholdrule, policies_requirement, policies_parameterprofile, "
                    "policies_acceptancepolicy CASCADE"
                )
            bench_key_publish()
            print(json.dumps(_measure(scale)), flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
