"""The words of the domain, each defined once.

Models, serializers, filters, SQL parameters and the fleet file take their values from these
enums; nothing else spells a verdict, a state or a reason as a bare string. A member's `label`
is what the API schema shows beside its value ("passed - PASSED"), so the spec's enum
descriptions come out of these definitions unchanged.
"""

from __future__ import annotations

from enum import EnumType, StrEnum


class _VocabularyType(EnumType):
    """Gives every vocabulary the `values` and `choices` of Django's `TextChoices`, so model
    fields, serializers and filters take them as they would a `TextChoices` class."""

    @property
    def values(cls) -> list[str]:
        return [member.value for member in cls._members()]

    @property
    def choices(cls) -> list[tuple[str, str]]:
        """`(value, label)` pairs."""
        return [(member.value, member.label) for member in cls._members()]

    def _members(cls) -> list[Vocabulary]:
        return list(cls.__members__.values())


class Vocabulary(StrEnum, metaclass=_VocabularyType):
    """A closed set of domain values (a `StrEnum`: members compare equal to their values)."""

    @property
    def label(self) -> str:
        return self.name


# --- inventory -----------------------------------------------------------------------------------


class DeviceState(Vocabulary):
    """A device's lifecycle state."""

    STAGED = "staged"
    BURN_IN = "burn_in"
    ACCEPTED = "accepted"
    IN_SERVICE = "in_service"
    MAINTENANCE = "maintenance"
    DECOMMISSIONED = "decommissioned"
    NEEDS_REPAIR = "needs_repair"  # failed too often, or named by culprit isolation: a repair record brings it back


#: States in which burn-in may run on a device; any other state makes it ineligible.
BURN_IN_STATES: frozenset[DeviceState] = frozenset({DeviceState.STAGED, DeviceState.BURN_IN, DeviceState.MAINTENANCE})


class NodeGateAction(Vocabulary):
    """What the agent's node gate does to a scheduler node (`fleet_rules.node_gate`, docs/agent.md)."""

    DRAIN = "drain"  # drained with a fleet-burnin reason: no job starts on it
    RESUME = "resume"  # fleet-burnin's drain lifted
    HOLD = "hold"  # put in fleet-burnin's reservation: only burn-in jobs start on it
    RELEASE = "release"  # taken out of fleet-burnin's reservation: back to production


class NodeGateSkip(Vocabulary):
    """Why the node gate left a node as it is although its device's state asks for a change."""

    FOREIGN_REASON = "foreign_reason"  # drained (or down) by someone else: never resumed or re-reasoned
    FOREIGN_RESERVATION = "foreign_reservation"  # in someone else's reservation: never released or taken over
    NOT_IN_SLURM = "not_in_slurm"  # the scheduler has no node of that name
    NOT_A_NODE_NAME = "not_a_node_name"  # the name is outside Slurm's grammar (never written to scontrol)


class Mover(Vocabulary):
    """Who may cause a lifecycle transition (`fleet_rules.lifecycle`)."""

    SYSTEM = "system"  # the service itself, as evidence arrives
    OPERATOR = "operator"  # a person or an operator client, through the API or the dashboard
    FLEET_FILE = "fleet_file"  # `fleet apply` declaring a state


class TransitionCause(Vocabulary):
    """Why a device's lifecycle state changed, or why an automatic change was held."""

    CERTIFICATE_ISSUED = "certificate_issued"
    CERTIFICATE_SUPERSEDED = "certificate_superseded"
    FAILED_TOO_OFTEN = "failed_too_often"
    ISOLATION = "isolation"
    REPAIR = "repair"
    OPERATOR = "operator"
    FLEET_FILE = "fleet_file"
    HELD_BY_BREAKER = "held_by_breaker"  # an automatic move the circuit breaker held: the state did not change
    FATAL_XID = "fatal_xid"  # the kernel logged a fatal Xid for one of its GPUs during a burn-in (fleet_rules.xid)
    RENEWAL = (
        "renewal"  # the autopilot burns in again an accepted device, not in service, whose certificate expires soon
    )


class TopologyUnit(Vocabulary):
    """What kind of group a topology is; multi-node requirements name one."""

    NVLINK_DOMAIN = "nvlink-domain"
    POD = "pod"
    RACK = "rack"


# --- policies ------------------------------------------------------------------------------------


class RequirementScope(Vocabulary):
    SINGLE_NODE = "single_node"
    MULTI_NODE = "multi_node"


#: The one gate multi-node requirements may belong to (for now), and the only one they may.
RACK_ACCEPTANCE = "rack-acceptance"


class Comparator(Vocabulary):
    """How a measured value is compared with a threshold (`value <comparator> threshold`)."""

    GT = "gt"
    LT = "lt"
    EQ = "eq"
    GTE = "gte"
    LTE = "lte"

    @property
    def label(self) -> str:
        return self.value  # the spec lists comparators as "* `gt` - gt"


# --- jobs ----------------------------------------------------------------------------------------


class WorkflowName(Vocabulary):
    """The workflows a satellite's agent advertises and jobs are created for."""

    SINGLE_NODE = "SingleNodeBurnInWorkflow"
    MULTI_NODE_COLLECTIVE = "MultiNodeBurnInCollectiveWorkflow"


class JobStatus(Vocabulary):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_JOB_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
#: How a job may end, in the order the API lists them; a job in one of these never moves again.
JOB_OUTCOMES: tuple[JobStatus, ...] = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
TERMINAL_JOB_STATUSES: frozenset[JobStatus] = frozenset(JOB_OUTCOMES)


class JobReason(Vocabulary):
    """Why a job was created."""

    DISPATCH = "dispatch"
    RERUN = "rerun"
    MANUAL = "manual"
    DIAGNOSIS = "diagnosis"  # a round of culprit isolation (its executions judge no target)
    REMEDIATION = "remediation"  # a step of the remediation ladder (a GPU reset, a reboot), then the burn-in again


class PersonAction(Vocabulary):
    """A person's state-changing action on the dashboard, recorded once under its one-time token."""

    RERUN_DISPATCH = "dispatch reruns"
    JOB_CANCEL = "cancel job"
    ISOLATION_DISPATCH = "start isolation"
    REPAIR_RECORD = "record a repair"
    BREAKER_RESET = "close a breaker"
    AUTOPILOT_PAUSE = "pause the autopilot"
    AUTOPILOT_RESUME = "resume the autopilot"
    WEBHOOK_REDELIVER = "redeliver webhooks"


# --- burn-in evidence and the projection ----------------------------------------------------------


class ExecutionStatus(Vocabulary):
    RUNNING = "running"
    COMPLETED = "completed"
    ERRORED = "errored"


FINISHED_EXECUTION_STATUSES: frozenset[ExecutionStatus] = frozenset(
    {ExecutionStatus.COMPLETED, ExecutionStatus.ERRORED}
)


class Verdict(Vocabulary):
    """What the projection says about one target. `errored` is its own verdict: the test could not
    judge the hardware, which is neither a pass nor a fail."""

    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"
    NOT_RUN = "not_run"
    IN_PROGRESS = "in_progress"
    #: A pass older than its requirement's `evidence_valid_for`: it no longer counts.
    EXPIRED = "expired"


class EvaluationOutcome(Vocabulary):
    """What became of one posted evaluation result (first match wins, in this order)."""

    INVALID = "invalid"
    STALE = "stale"
    UNCHANGED = "unchanged"
    WRITTEN = "written"


class ReconcileOutcome(Vocabulary):
    """What a reconcile page did with each target (its response's counters); `deleted` counts the
    rows a sweep's final page removed."""

    WRITTEN = "written"
    UNCHANGED = "unchanged"
    DEFERRED = "deferred"
    DELETED = "deleted"


# --- rerun planning ------------------------------------------------------------------------------


class PlanningMode(Vocabulary):
    NON_PASSING = "non_passing"
    ALL = "all"


class RepairRerun(Vocabulary):
    """What a repair's re-burn-in runs: every requirement again, or only what failed."""

    ALL = "all"
    FAILED = "failed"


class SkipReason(Vocabulary):
    """Why a requirement of a selected device was not dispatched (listed in the spec's order; the
    precedence between them is `planning.SINGLE_NODE_CHAIN`)."""

    PROJECTION_PENDING = "projection_pending"
    ALREADY_SATISFIED = "already_satisfied"
    NO_POLICY_SATISFYING_PARAMETER_SOURCE = "no_policy_satisfying_parameter_source"
    POLICY_CHANGED = "policy_changed"
    WORKFLOW_UNAVAILABLE = "workflow_unavailable"
    DEVICE_INELIGIBLE = "device_ineligible"
    DEVICE_CONTENDED = "device_contended"
    ALREADY_DISPATCHED = "already_dispatched"
    TOPOLOGY_COHORT_BLOCKED = "topology_cohort_blocked"


class ExclusionReason(Vocabulary):
    """Why a selected device was left out of planning entirely."""

    NO_ACCEPTANCE_POLICY = "no_acceptance_policy"
    NO_SINGLE_NODE_REQUIREMENTS = "no_single_node_requirements"
    NO_RERUN_REQUIREMENTS = "no_rerun_requirements"


class ConstraintOperator(Vocabulary):
    """Operators of a requirement's parameter constraints (`{"duration_s": {"gte": 3600}}`)."""

    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    IN = "in"


# --- diagnosis -----------------------------------------------------------------------------------


class OutlierGroupReason(Vocabulary):
    """Why a group of siblings names no outlier although it was looked at."""

    TOO_FEW_DEVICES = "too_few_devices"  # fewer devices than the minimum group size
    MAD_ZERO = "mad_zero"  # at least half the devices measured the same value: no spread to judge by
    NO_BAD_SIDE = "no_bad_side"  # an `eq` rule has no direction that is worse
    NONE_BEYOND_K = "none_beyond_k"  # looked at, nobody is far enough out on the bad side


class IsolationStatus(Vocabulary):
    """Where a culprit isolation plan stands."""

    RUNNING = "running"  # a round is out, or the next one is to be dispatched
    FOUND = "found"  # it ended naming the device(s) whose presence makes the collective fail
    INCONCLUSIVE = "inconclusive"  # the rounds stopped narrowing (a fault that needs several devices, or flaky)
    CANCELLED = "cancelled"


# --- acceptance certificates ---------------------------------------------------------------------


class SupersedeReason(Vocabulary):
    """Why a device's acceptance certificate stopped being its current one (`fleet_rules.certificates`)."""

    FAILED = "failed"  # a newer result of one of its targets failed
    ERRORED = "errored"  # a newer result of one of its targets errored
    EXPIRED = "expired"  # a pass it rests on is older than its requirement's `evidence_valid_for`
    POLICY_CHANGED = "policy_changed"  # the device's policy has a new version
    RENEWED = "renewed"  # newer passing evidence replaced a deciding execution (a successor was issued)
    HARDWARE_CHANGED = "hardware_changed"  # the agent reported a fingerprint other than the one it binds


# --- health evidence of a burn-in window (issue 29) ----------------------------------------------


class HealthSource(Vocabulary):
    """Where the agent read a burn-in window's kernel-logged GPU events."""

    JOURNALCTL = "journalctl"  # `journalctl -k --since … --until …`
    DMESG = "dmesg"  # `dmesg --time-format iso` (no journal)
    SIMULATED = "simulated"  # the simulated executor


class FabricSource(Vocabulary):
    """Where the agent read a burn-in window's InfiniBand port error counters (`health.fabric.source`)."""

    SYSFS = "sysfs"  # `/sys/class/infiniband/<dev>/ports/<n>/counters/*` (grep -H, or read locally)
    PERFQUERY = "perfquery"  # infiniband-diags' `perfquery` (a PMA query)


class ThrottleReason(Vocabulary):
    """A clock-throttle reason the driver reported during a job (`nvidia-smi`'s clocks event reasons)."""

    HW_SLOWDOWN = "hw_slowdown"
    HW_THERMAL_SLOWDOWN = "hw_thermal_slowdown"
    HW_POWER_BRAKE_SLOWDOWN = "hw_power_brake_slowdown"
    SW_THERMAL_SLOWDOWN = "sw_thermal_slowdown"


class GpuVendor(Vocabulary):
    """Who made a resource class's GPUs: which tools burn it in and read its hardware (`fleet_rules.gpu_vendors`)."""

    NVIDIA = "nvidia"  # DCGM, nccl-tests, nvbandwidth, nvidia-smi, Xid/SXid
    AMD = "amd"  # ROCm Validation Suite, rccl-tests, TransferBench, amd-smi, amdgpu RAS events


# --- remediation before repair (issue 38) --------------------------------------------------------


class XidResolution(Vocabulary):
    """What a kernel-logged GPU event asks for at once, weakest first: NVIDIA's catalogue's immediate
    resolution in fleet-burnin's steps (`fleet_rules.xid_catalogue`). `repair` means a person must act
    (the catalogue's "contact support", "check mechanicals"); the steps between are the ladder."""

    NONE = "none"  # informational; nothing to do
    RESTART_APP = "restart_app"  # the application (here: the burn-in requirement) is run again
    RESET_GPU = "reset_gpu"  # `nvidia-smi -r -i N`, then the burn-in again
    REBOOT = "reboot"  # the node restarts, then the burn-in again
    REPAIR = "repair"  # needs_repair through the lifecycle service


class XidSeverity(Vocabulary):
    """How bad an event is for the hardware, as its catalogue says it."""

    INFORMATIONAL = "informational"  # nothing is wrong with the GPU
    APPLICATION = "application_error"  # the application (or its input) is at fault
    RECOVERABLE = "recoverable"  # the hardware erred; a reset or a reboot may clear it
    FATAL = "fatal"  # a person must act (Xid), or fatal to the whole fabric (SXid, until the host restarts)


class RemedyOutcome(Vocabulary):
    """How a step of the remediation ladder ended (`fleet_rules.remediation_ladder`)."""

    UNDER_WAY = "under_way"  # asked; its job has not run it yet, or the burn-in after it has not reported
    CURED = "cured"  # the burn-in after it logged none of what asked for it
    PERSISTED = "persisted"  # the burn-in after it logged it again: the next step
    FAILED = "failed"  # the step itself failed (its command, or its job ended without a burn-in)


# --- hardware fingerprints -----------------------------------------------------------------------


class RepairPartCheck(Vocabulary):
    """A repaired part against the first fingerprint read after the repair (`fleet_rules.fingerprint`)."""

    SEEN = "installed_seen"  # its installed serial is reported
    NOT_SEEN = "installed_not_seen"  # its installed serial is not reported: a mismatch
    REMOVED_STILL_SEEN = "removed_still_seen"  # the serial it says was removed is still reported: a mismatch
    NO_SERIAL = "no_installed_serial"  # the record names no installed serial: nothing to check
    NOT_READ_YET = "not_read_yet"  # no fingerprint has been read since the repair


# --- the bring-up autopilot ----------------------------------------------------------------------


class AutopilotActionKind(Vocabulary):
    """What a site's autopilot did (`fleet_rules.autopilot`), one line of its log each."""

    DISPATCH = "dispatch"  # burn-in for devices whose targets have not run yet
    RERUN = "rerun"  # failed or errored targets, after their backoff
    ISOLATE = "isolation"  # culprit isolation of a collective that fails while its members pass alone
    ADVANCE = "advance"  # the next round of a running isolation plan
    RENEW = "renew"  # an accepted device not in service whose certificate expires soon: burned in again
    PAUSE = "pause"  # an operator paused the site's autopilot
    RESUME = "resume"  # an operator resumed it
    DEFECT = "defect"  # a pass failed with an unexpected error: logged, the next pass goes on


# --- events out (the outbox and webhooks) -----------------------------------------------------------


class EventType(Vocabulary):
    """What an event says happened (CloudEvents `type`). A device's state change is
    `com.fleet-burnin.device.<state>`: one per `DeviceState`, so a subscriber asks for
    `device.needs_repair` as it reads the lifecycle."""

    DEVICE_STAGED = "com.fleet-burnin.device.staged"
    DEVICE_BURN_IN = "com.fleet-burnin.device.burn_in"
    DEVICE_ACCEPTED = "com.fleet-burnin.device.accepted"
    DEVICE_IN_SERVICE = "com.fleet-burnin.device.in_service"
    DEVICE_MAINTENANCE = "com.fleet-burnin.device.maintenance"
    DEVICE_DECOMMISSIONED = "com.fleet-burnin.device.decommissioned"
    DEVICE_NEEDS_REPAIR = "com.fleet-burnin.device.needs_repair"
    REPAIR_RECORDED = "com.fleet-burnin.repair.recorded"
    BREAKER_OPENED = "com.fleet-burnin.breaker.opened"
    BREAKER_RESET = "com.fleet-burnin.breaker.reset"
    CERTIFICATE_ISSUED = "com.fleet-burnin.certificate.issued"
    CERTIFICATE_SUPERSEDED = "com.fleet-burnin.certificate.superseded"
    #: Every enrolled device of a (site, resource class) holds a valid certificate, since the
    #: certificate this event's reconcile page issued (again after the class stopped being so).
    CLASS_ACCEPTED = "com.fleet-burnin.class.accepted"
    ISOLATION_CULPRIT_FOUND = "com.fleet-burnin.isolation.culprit_found"
    AUTOPILOT_PAUSED = "com.fleet-burnin.autopilot.paused"
    AUTOPILOT_RESUMED = "com.fleet-burnin.autopilot.resumed"


#: The prefix of a device state change's event type (the state's value follows).
DEVICE_EVENT_PREFIX = "com.fleet-burnin.device."


class DeliveryStatus(Vocabulary):
    """Where one event's delivery to one subscription stands."""

    SCHEDULED = "scheduled"  # not yet acknowledged: due at its next try
    DELIVERED = "delivered"  # the receiver answered 2xx
    FAILED = "failed"  # retried for the subscription's whole retry window, then given up (redeliver restarts it)
