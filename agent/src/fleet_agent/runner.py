"""The agent's loops: heartbeat, jobs, phase 1 (evaluate) and phase 2 (reconcile).

`once()` runs one pass of every loop in that order and raises on failure; `run()` keeps every
loop going on its interval until `stop()` (SIGTERM/SIGINT), finishing the report in flight.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleet_agent import __version__, metrics
from fleet_agent.client import ApiError, FleetClient
from fleet_agent.config import AgentConfig
from fleet_agent.executors.base import ERRORED, Executor, Resumable, TestOutcome, TestRun
from fleet_agent.executors.hardware import HEALTH_WINDOW_TEST, HardwareSource, JobHardware, job_start, member_windows
from fleet_agent.executors.remedies import remedy_take
from fleet_agent.inventory_sweep import SweepReport, inventory_sweep
from fleet_agent.node_gate import GateReport, SlurmGate, gate_sweep
from fleet_agent.state import AgentState
from fleet_agent.targets import GpuVendorBook, device_target
from fleet_rules.evaluator import evaluate

logger = logging.getLogger("fleet_agent")

#: Execution ids are derived from (job, requirement, target): a replay after a crash reports the
#: same execution again instead of inventing a second one.
EXECUTION_NAMESPACE = uuid.UUID("5f0c3b1e-6a44-4c1b-9d0e-0b2f6c8f7a10")
MULTI_NODE = "MultiNodeBurnInCollectiveWorkflow"


def execution_id_for(job_id: str, requirement: str, target_id: str) -> str:
    return str(uuid.uuid5(EXECUTION_NAMESPACE, f"{job_id}/{requirement}/{target_id}"))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _final(outcome: TestOutcome) -> dict[str, Any]:
    """The fields of an execution's final report that come from how its run ended."""
    return {
        "status": outcome.status,
        "metrics": outcome.metrics,
        "error": outcome.error or "",
        "started_at": _iso(outcome.started_at),
        "finished_at": _iso(outcome.finished_at),
    }


@dataclass
class PassReport:
    """What one pass did, for logs and for the exit status of `once`."""

    jobs_run: int = 0
    executions: int = 0
    evaluated: dict[str, int] = field(default_factory=lambda: {"written": 0, "unchanged": 0, "stale": 0, "invalid": 0})
    reconciled: dict[str, dict[str, Any]] = field(default_factory=dict)
    gated: list[GateReport] = field(default_factory=list)
    swept: SweepReport | None = None  # the inventory sweep, when `inventory_interval` is on


def ordered_requirements(requirements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The job's requirements in their order, except that the `health-window` test comes last whatever the job
    lists: its window must cover every other test of the job."""
    return sorted(requirements, key=lambda requirement: requirement.get("test") == HEALTH_WINDOW_TEST)


class JobAbandoned(Exception):
    """The service says the job is no longer ours (cancelled, or its lease expired)."""


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        client: FleetClient,
        executor: Executor,
        state: AgentState,
        gate: SlurmGate | None = None,
    ) -> None:
        self.config, self.client, self.executor, self.state = config, client, executor, state
        self.gate = gate  # the Slurm node gate, when `node_gate` is on
        ask = lambda: client.satellite_classes(config.site, config.satellite)[1]  # noqa: E731 - the service's answer
        self.vendor_of = GpuVendorBook(config.gpu_vendors, executor=executor, ask=ask)  # who made a class's GPUs
        self._stop = threading.Event()

    # --- lifecycle ------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def recover(self) -> None:
        """After a crash: executions left `running` are reported errored, jobs left held are
        finished as failed, so nothing stays stuck until a lease expires.

        A run the executor handed to another system (a Slurm job) is not lost with the agent: with
        `Resumable` executors it is reattached (waited for, its lease kept, its result reported) or
        cancelled and reported, as `slurm_on_restart` says; if the service already closed the execution
        (the lease expired meanwhile) the run is cancelled."""
        remote = self.state.remote_runs()
        resumable = self.executor if isinstance(self.executor, Resumable) else None
        for execution_id, report in self.state.in_flight().items():
            current = self.client.get_execution(execution_id)
            record = remote.get(execution_id)
            if current is not None and current["status"] == "running":
                if record is not None and resumable is not None:
                    body = report | self._resumed(resumable, report, record)
                else:
                    body = report | {
                        "status": ERRORED,
                        "finished_at": _iso(datetime.now(UTC)),
                        "error": "the agent restarted while this execution ran; its result is lost",
                    }
                try:
                    self.client.report_execution(execution_id, body)
                    logger.warning("reported interrupted execution %s as errored", execution_id)
                except ApiError as exc:
                    logger.warning("could not close interrupted execution %s: %s", execution_id, exc)
            elif record is not None and resumable is not None:
                logger.warning("execution %s is closed; %s", execution_id, resumable.cancel(record))
            # Otherwise it finished (its final report landed before the crash) or never existed.
            self.state.execution_finished(execution_id)
        for job_id in self.state.held_jobs():
            try:
                self.client.finish_job(job_id, "failed", "the agent restarted while running this job")
                logger.warning("failed job %s left over from before a restart", job_id)
            except ApiError as exc:
                logger.info("job %s left over from before a restart already ended: %s", job_id, exc.code)
            self.state.job_finished(job_id)

    def _resumed(self, executor: Resumable, report: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """The final report of a run left behind by a restart: reattached, or cancelled (`slurm_on_restart`)."""
        if getattr(self.config, "slurm_on_restart", "reattach") == "cancel":
            what = executor.cancel(record)
            logger.warning("execution %s: %s after a restart", report.get("requirement"), what)
            return {
                "status": ERRORED,
                "finished_at": _iso(datetime.now(UTC)),
                "error": f"the agent restarted while this execution ran; {what}",
            }
        job_id = str(report.get("job_id", ""))
        logger.warning("reattaching to %s job %s of execution %s", record.get("executor"), record.get("job_id"), job_id)
        with self._lease_kept(job_id, self.state.lease_seconds(job_id) or 60.0) as lost:
            outcome = executor.resume(record, should_stop=lambda: self.stopping or lost.is_set())
        return _final(outcome) | {"error": outcome.error or ""}

    @contextlib.contextmanager
    def _lease_kept(self, job_id: str, lease_seconds: float) -> Iterator[threading.Event]:
        """Heartbeat the job's lease every third of it while the block runs; the event is set once the
        service answers 409 (the job was cancelled, or its lease expired)."""
        lost, done = threading.Event(), threading.Event()

        def keep_lease() -> None:
            interval = max(1.0, lease_seconds / 3)
            while not done.wait(interval):
                try:
                    self.client.job_heartbeat(job_id)
                except ApiError as exc:
                    if exc.status == 409:
                        logger.warning("job %s is no longer ours: %s", job_id, exc.body.get("detail"))
                        lost.set()
                        return
                    logger.warning("lease heartbeat for job %s failed: %s", job_id, exc)
                except Exception:
                    logger.exception("lease heartbeat for job %s failed", job_id)

        heart = threading.Thread(target=keep_lease, name=f"lease-{job_id[:8]}", daemon=True)
        heart.start()
        try:
            yield lost
        finally:
            done.set()
            heart.join(timeout=5)

    def once(self) -> PassReport:
        report = PassReport()
        self.recover()
        self.heartbeat()
        if self.gate is not None:  # before the jobs: a node burn-in runs on must be in the reservation
            report.gated.append(self.gate_nodes())
        while not self.stopping:
            jobs = self.client.claim(self.config.site, self.config.satellite, self.config.concurrency)
            if not jobs:
                break
            with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="job") as pool:
                for executions in pool.map(self.run_job, jobs):
                    report.jobs_run += 1
                    report.executions += executions
        report.evaluated = self.evaluate_pending()
        report.reconciled = self.reconcile_all()
        if self.config.inventory_interval > 0:  # after the verdicts: the devices they accepted are read too
            report.swept = self.sweep_inventory()
        if self.gate is not None:  # and after the verdicts: they may have moved devices
            report.gated.append(self.gate_nodes())
        return report

    def run(self) -> None:
        """The daemon: every loop on its interval until stopped. A failing loop is logged and
        retried on its next tick; it never takes the others down."""
        self.recover()
        pool = ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="job")
        running: set[Future[int]] = set()
        # The inventory sweep reads every accepted device's hardware (minutes on a large site): on its own
        # thread, so that heartbeats and claims go on meanwhile; a tick while one runs starts no other.
        sweeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inventory")
        sweeping: set[Future[SweepReport]] = set()
        loops = [
            ("heartbeat", self.config.heartbeat_interval, self.heartbeat),
            *([("gate", self.config.node_gate_interval, self.gate_nodes)] if self.gate is not None else []),
            ("jobs", self.config.jobs_interval, lambda: self._claim_into(pool, running)),
            ("evaluate", self.config.evaluate_interval, self.evaluate_pending),
            ("reconcile", self.config.reconcile_interval, self.reconcile_all),
            *(
                [("inventory", self.config.inventory_interval, lambda: self._sweep_aside(sweeper, sweeping))]
                if self.config.inventory_interval
                else []
            ),
        ]
        due = dict.fromkeys((name for name, _, _ in loops), 0.0)
        try:
            while not self.stopping:
                for name, interval, loop in loops:
                    if self.stopping or time.monotonic() < due[name]:
                        continue
                    try:
                        loop()
                    except Exception:
                        logger.exception("%s loop failed; retrying in %.0fs", name, interval)
                    due[name] = time.monotonic() + interval
                self._stop.wait(max(0.05, min(due.values()) - time.monotonic()))
        finally:
            logger.info("stopping: finishing %d job(s) in flight", len(running))
            pool.shutdown(wait=True)
            sweeper.shutdown(wait=True)  # it stops between devices

    def _claim_into(self, pool: ThreadPoolExecutor, running: set[Future[int]]) -> None:
        running.difference_update({f for f in running if f.done()})
        free = self.config.concurrency - len(running)
        if free <= 0:
            return
        for job in self.client.claim(self.config.site, self.config.satellite, free):
            future = pool.submit(self.run_job, job)
            running.add(future)

    # --- the Slurm node gate --------------------------------------------------------------------

    def gate_nodes(self) -> GateReport:
        """One sweep of the node gate (`fleet_agent.node_gate`)."""
        assert self.gate is not None
        return gate_sweep(
            self.client, self.gate, site=self.config.site, satellite=self.config.satellite, dry_run=self.config.dry_run
        )

    # --- the inventory sweep ---------------------------------------------------------------------

    def _sweep_aside(self, sweeper: ThreadPoolExecutor, sweeping: set[Future[SweepReport]]) -> None:
        """`run`'s inventory tick: start a sweep on the sweeper's thread unless one is still running."""
        sweeping.difference_update({f for f in sweeping if f.done()})
        if sweeping:
            logger.info("inventory sweep: the last one still runs; none started")
            return
        started = sweeper.submit(self.sweep_inventory)
        started.add_done_callback(self._swept)
        sweeping.add(started)

    def _swept(self, done: Future[SweepReport]) -> None:
        failure = done.exception()
        if failure is not None:
            interval = self.config.inventory_interval
            logger.error("inventory loop failed; retrying in %.0fs", interval, exc_info=failure)

    def sweep_inventory(self) -> SweepReport:
        """One inventory sweep (`fleet_agent.inventory_sweep`): accepted and in-service devices' hardware."""
        if not self.config.report_hardware:
            logger.info("inventory sweep: report_hardware is off; nothing swept")
            return SweepReport()
        if not getattr(self.executor, "sweeps_hardware", True):
            logger.info(
                "inventory sweep: the %s executor reads hardware in burn-in jobs only; nothing swept",
                self.executor.name,
            )
            return SweepReport()
        source: HardwareSource | None = getattr(self.executor, "hardware", None)
        return inventory_sweep(
            self.client,
            source,
            site=self.config.site,
            satellite=self.config.satellite,
            stopping=lambda: self.stopping,
            vendor_of=self.vendor_of,
        )

    # --- heartbeat ------------------------------------------------------------------------------

    def heartbeat(self) -> None:
        self.client.heartbeat(self.config.site, self.config.satellite, self.executor.workflows(), __version__)

    # --- jobs -----------------------------------------------------------------------------------

    def run_job(self, job: dict[str, Any]) -> int:
        """Run a claimed job; if anything goes wrong, fail it at once (not at its lease's end) and re-raise."""
        try:
            return self._run_job(job)
        except Exception:
            logger.exception("job %s failed in the agent", job["id"])
            metrics.JOBS.labels("failed").inc()
            try:
                self.client.finish_job(job["id"], "failed", "the agent hit an error running this job")
            except Exception:
                logger.exception("could not fail job %s; its lease will expire", job["id"])
            self.state.job_finished(job["id"])
            raise

    def _run_job(self, job: dict[str, Any]) -> int:
        """Run every requirement of a claimed job, reporting each execution, heartbeating the
        lease meanwhile, then finish the job. Returns how many executions were reported."""
        job_id = job["id"]
        lease_seconds = self._lease_seconds(job)
        self.state.job_started(job_id, lease_seconds)
        executions, errored_any = 0, False
        requirements = ordered_requirements(job["parameters"].get("requirements", []))
        with self._lease_kept(job_id, lease_seconds) as lost:  # a remediation job's step first (docs/remediation.md)
            failed = remedy_take(self.executor, job, self.vendor_of, lambda: self.stopping or lost.is_set())
            hardware = self._job_hardware(job, requirements)
            for requirement in [] if failed else requirements:
                if self.stopping or lost.is_set():
                    break
                status = self._run_requirement(
                    job, requirement, hardware=hardware, should_stop=lambda: self.stopping or lost.is_set()
                )
                executions += 1
                errored_any |= status == ERRORED
        if lost.is_set():
            self.state.job_finished(job_id)
            metrics.JOBS.labels("abandoned").inc()
            return executions
        if self.stopping:
            outcome, reason = "failed", "the agent stopped before the job finished"
        elif failed or errored_any:
            outcome, reason = "failed", failed or "an execution errored"
        else:
            outcome, reason = "succeeded", ""
        try:
            self.client.finish_job(job_id, outcome, reason)
        except ApiError as exc:
            logger.warning("could not finish job %s: %s", job_id, exc)
        self.state.job_finished(job_id)
        metrics.JOBS.labels(outcome).inc()
        logger.info(
            "job %s %s: %d execution(s) reported; their verdicts come from phase 1", job_id, outcome, executions
        )
        return executions

    def _job_hardware(self, job: dict[str, Any], requirements: list[dict[str, Any]]) -> JobHardware:
        """At the start of a single-device job: what `job_start` reads (the inventory, when `report_hardware`, and
        the snapshots a health window starts from). A multi-node job, or an executor that cannot read hardware,
        gets none."""
        source: HardwareSource | None = getattr(self.executor, "hardware", None)
        if source is None or job["workflow_name"] == MULTI_NODE or not job["devices"]:
            return JobHardware()
        target = device_target(job["devices"][0], self.vendor_of)
        window = any(requirement.get("test") == HEALTH_WINDOW_TEST for requirement in requirements)
        return job_start(source, target, report_hardware=self.config.report_hardware, window=window)

    def _lease_seconds(self, job: dict[str, Any]) -> float:
        """The lease length by the service's clock (claimed → expires): a skewed agent clock cannot stretch it."""
        try:
            expires = datetime.fromisoformat(job["lease_expires_at"].replace("Z", "+00:00"))
            claimed = datetime.fromisoformat(job["claimed_at"].replace("Z", "+00:00"))
            return max(3.0, (expires - claimed).total_seconds())
        except (KeyError, TypeError, ValueError, AttributeError):
            return 60.0

    def _run_requirement(
        self,
        job: dict[str, Any],
        requirement: dict[str, Any],
        *,
        should_stop: Callable[[], bool],
        hardware: JobHardware | None = None,
    ) -> str:
        hardware = hardware or JobHardware()
        devices = job["devices"]
        multi = job["workflow_name"] == MULTI_NODE
        targets = tuple(device_target(device, self.vendor_of) for device in devices)
        target_id = job["topology"]["id"] if multi else devices[0]["id"]
        execution_id = execution_id_for(job["id"], requirement["name"], target_id)
        base = {
            "requirement": requirement["name"],
            "test": requirement["test"],
            "job_id": job["id"],
            "parameters": requirement.get("parameters", {}),
            ("topology_id" if multi else "device_id"): target_id,
        }
        if hardware.inventory is not None and not multi:
            base["inventory"] = hardware.inventory
        running = base | {"status": "running", "started_at": _iso(datetime.now(UTC))}
        self.state.execution_started(execution_id, running)
        self.client.report_execution(execution_id, running)
        attempt = self.state.next_attempt(requirement["name"], target_id)
        source: HardwareSource | None = getattr(self.executor, "hardware", None)
        window_since = datetime.now(UTC)
        outcome = self.executor.run(
            TestRun(
                requirement=requirement["name"],
                test=requirement["test"],
                parameters=dict(requirement.get("parameters", {})),
                targets=targets,
                topology_label=job["topology"]["label"] if multi else None,
                topology_unit=job["topology"].get("unit") if multi else None,
                execution_id=execution_id,
                window_since=hardware.since,
                health_before=hardware.before,
                fabric_before=hardware.fabric_before,
            ),
            attempt=attempt,
            should_stop=should_stop,
        )
        final = base | _final(outcome)
        if outcome.health is not None and self.config.report_hardware and not multi:
            final["health"] = outcome.health
        if multi and source is not None and self.config.report_hardware:
            # each member node's kernel-logged GPU events of the collective's window: the service judges them
            # together (a code on most of the job's nodes is the workload's: docs/remediation.md)
            final["member_health"] = member_windows(source, targets, window_since, datetime.now(UTC))
        self.client.report_execution(execution_id, final)
        self.state.execution_finished(execution_id)
        metrics.EXECUTIONS.labels(outcome.status).inc()
        where = job["topology"]["label"] if multi else devices[0]["hostname"]
        if outcome.status == ERRORED:
            logger.warning("%s on %s errored (attempt %d): %s", requirement["name"], where, attempt, outcome.error)
        else:
            logger.info("%s on %s: measured (attempt %d); phase 1 judges it", requirement["name"], where, attempt)
        return outcome.status

    # --- phase 1 --------------------------------------------------------------------------------

    def evaluate_pending(self) -> dict[str, int]:
        """Evaluate everything the feed offers, posting results in batches."""
        totals = {"written": 0, "unchanged": 0, "stale": 0, "invalid": 0, "skipped": 0}
        cursor = None
        while not self.stopping:
            page = self.client.pending_evaluations(
                self.config.site, self.config.satellite, self.config.page_limit, cursor
            )
            results = []
            for item in page["results"]:
                try:
                    payload = evaluate(
                        status=item["status"],
                        metrics=item["metrics"],
                        rules=item["thresholds"],
                        error=item.get("error") or None,
                    )
                except ValueError as exc:
                    # One malformed rule must not stall the whole feed: skip it, loudly.
                    logger.error(
                        "phase 1: cannot evaluate execution %s (%s): %s",
                        item["execution_id"],
                        item.get("requirement"),
                        exc,
                    )
                    totals["skipped"] += 1
                    continue
                _log_verdict(item, payload)
                results.append(
                    {
                        "execution_id": item["execution_id"],
                        "evaluation_result": payload,
                        "evaluation_source_key": item["evaluation_source_key"],
                        "expected_updated_at": item["updated_at"],
                    }
                )
            for start in range(0, len(results), self.config.results_batch):
                counts = self.client.upsert_results(results[start : start + self.config.results_batch])
                for key in ("written", "unchanged", "stale", "invalid"):
                    totals[key] += counts[key]
            cursor = page["next_cursor"]
            if not cursor:
                break
        if any(totals.values()):
            logger.info(
                "phase 1: written %(written)d, unchanged %(unchanged)d, stale %(stale)d, invalid %(invalid)d, "
                "skipped %(skipped)d",
                totals,
            )
        if totals["invalid"]:
            logger.warning("phase 1: %d result(s) were invalid (check the agent's site binding)", totals["invalid"])
        return totals

    # --- phase 2 --------------------------------------------------------------------------------

    def reconcile_all(self) -> dict[str, dict[str, Any]]:
        summary = {}
        for resource_class in self.client.resource_classes(self.config.site, self.config.satellite):
            if self.stopping:
                break
            started = time.monotonic()
            try:
                summary[resource_class] = self.sweep(resource_class)
                metrics.SWEEPS.labels(resource_class).inc()
                metrics.SWEEP_SECONDS.labels(resource_class).observe(time.monotonic() - started)
            except ApiError as exc:
                if "resource_class" in exc.field_errors():
                    logger.warning("phase 2: %s has no acceptance policy; its devices are not judged", resource_class)
                    continue
                raise
        return summary

    def sweep(self, resource_class: str, restarts: int = 3) -> dict[str, Any]:
        """Reconcile one scope to the end of a sweep, restarting when the cursor is refused (the
        policy changed mid-sweep) and backing off while pages are all waiting on phase 1."""
        totals = {"written": 0, "unchanged": 0, "deferred": 0, "deleted": 0, "guard_tripped": False, "targets": 0}
        cursor, backoff = None, self.config.deferred_backoff
        while not self.stopping:
            try:
                page = self.client.reconcile(
                    self.config.site, self.config.satellite, resource_class, self.config.reconcile_limit, cursor
                )
            except ApiError as exc:
                if cursor and exc.status == 400 and "cursor" in exc.field_errors() and restarts > 0:
                    logger.info("phase 2: %s sweep restarted: %s", resource_class, exc.field_errors()["cursor"][0])
                    return self.sweep(resource_class, restarts - 1)
                raise
            for key in ("written", "unchanged", "deferred", "deleted"):
                totals[key] += page[key]
            totals["targets"] = page["target_count"]
            totals["guard_tripped"] |= page["guard_tripped"]
            seen = page["written"] + page["unchanged"] + page["deferred"]
            if seen and page["deferred"] == seen and page["next_cursor"]:
                self._stop.wait(backoff)  # every target of the page waits on phase 1: give it time
                backoff = min(backoff * 2, 30.0)
            cursor = page["next_cursor"]
            if cursor is None:
                break
        if totals["targets"] == 0:
            logger.warning(
                "phase 2: the %s policy governs NO target of %s/%s (target_count 0): check enrolment and the policy",
                resource_class,
                self.config.site,
                self.config.satellite,
            )
        if totals["guard_tripped"]:
            logger.warning(
                "phase 2: %s cleanup guard tripped: rows of vanished targets were kept; check the "
                "inventory before they are removed",
                resource_class,
            )
        logger.info(
            "phase 2: %s: %d target(s), written %d, unchanged %d, deferred %d, deleted %d",
            resource_class,
            totals["targets"],
            totals["written"],
            totals["unchanged"],
            totals["deferred"],
            totals["deleted"],
        )
        return totals


def _log_verdict(item: dict[str, Any], payload: dict[str, Any]) -> None:
    """Say what the hardware did: a failed or errored test in words, at warning level."""
    where = item.get("target_name") or item.get("device_id") or item.get("topology_id")
    if payload["passed"]:
        logger.debug("phase 1: %s on %s passed", item.get("requirement"), where)
    else:
        verdict = "errored" if item["status"] == ERRORED else "FAILED"
        logger.warning("phase 1: %s on %s %s: %s", item.get("requirement"), where, verdict, payload.get("reason"))
