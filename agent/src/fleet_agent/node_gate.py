"""The Slurm node gate (`node_gate: true`): every sweep, bring each node's Slurm state in line with its
device's lifecycle state (docs/agent.md, "The Slurm node gate").

Load, decide, write: the sweep reads every device of the satellite with its state from the service
(`GET /api/v1/satellites/node-states/`, all pages, before anything changes) and what Slurm says
(`scontrol show node -o`, `scontrol show reservation -o`), asks the pure `fleet_rules.node_gate.gate_plan`
what to change, then applies the changes in the plan's order with `scontrol`, each call bounded in time.
A sweep that cannot read either side changes nothing. With `dry_run` it only says what it would do.

Why a reservation rather than a drain for burn-in: a drained node starts no job at all, burn-in included,
while the devices in staged, burn_in and maintenance are exactly the ones burn-in must run on. A
reservation keeps every other job off the node and lets in the jobs that name it: the Slurm executor
submits every burn-in job with `--reservation` = this reservation (`slurm_reservation`, default
`fleet-burnin`). Why not a partition: a partition's node list is slurm.conf's (an `scontrol update` of it is
lost at the next reconfigure), while a reservation is kept in slurmctld's state. The gate owns its
reservation: it creates it when the first node needs holding, sets its node list, and deletes it when no
node needs holding (Slurm refuses a reservation without nodes).
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fleet_agent import metrics
from fleet_agent.client import FleetClient
from fleet_agent.executors.slurm import SlurmSettings, slurm_tool
from fleet_rules.node_gate import PRODUCTION_STATES, GateChange, GatedDevice, GatePlan, NodeView, gate_plan
from fleet_rules.vocabulary import DeviceState, NodeGateAction, NodeGateSkip

__all__ = [
    "DEFAULT_RESERVATION",
    "GateError",
    "GateReport",
    "SlurmGate",
    "SlurmView",
    "gate_sweep",
    "parse_nodes",
    "parse_reservations",
]

logger = logging.getLogger("fleet_agent.node_gate")

#: The reservation the gate holds nodes in when `slurm_reservation` is not set.
DEFAULT_RESERVATION = "fleet-burnin"
_TOOL_TIMEOUT_S = 30.0
_PAGE_LIMIT = 500
_MAX_PAGES = 1000  # 500,000 devices: a service that never stops paging is a fault, not a fleet

_NODE_NAME = re.compile(r"^NodeName=(\S+)")
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_REASON = re.compile(r"(?:^|\s)Reason=(.*)$")
#: Slurm appends who set a reason and when: `Reason=bad fan [root@2026-12-03T14:50:06]`.
_REASON_STAMP = re.compile(r"\s*\[[^\[\]\s]*@[^\[\]\s]*\]")
_RESERVATION_NAME = re.compile(r"^ReservationName=(\S+)")
_RESERVATION_NODES = re.compile(r"(?:^|\s)Nodes=(\S*)")


class GateError(Exception):
    """One side could not be read (Slurm, or the service): the sweep changed nothing."""


def parse_nodes(text: str) -> dict[str, NodeView]:
    """`scontrol show node -o` (one node per line) → the nodes by name. Lines that are not a node
    (`No nodes in the system`) are ignored; a node line without `State=` is refused (`GateError`):
    the gate must not guess a node's state."""
    nodes: dict[str, NodeView] = {}
    for line in text.splitlines():
        named = _NODE_NAME.match(line.strip())
        if named is None:
            continue
        name = named.group(1)
        state = _STATE.search(line)
        if state is None:
            raise GateError(f"scontrol show node: no State= for node {name}")
        base, *flags = state.group(1).upper().replace("*", "").replace("~", "").replace("#", "").split("+")
        reason = ""
        said = _REASON.search(line)
        if said is not None:
            reason = _REASON_STAMP.split(said.group(1), maxsplit=1)[0].strip()
            if reason in ("(null)", "None"):
                reason = ""
        nodes[name] = NodeView(
            name=name,
            drained="DRAIN" in flags or base in ("DRAINED", "DRAINING", "DRAIN"),
            down=base == "DOWN",
            reason=reason,
            reserved="RESERVED" in flags or base == "RESERVED",
        )
    return nodes


def parse_reservations(text: str) -> dict[str, str]:
    """`scontrol show reservation -o` → each reservation's `Nodes=` expression (`n[1,3-4]`; "" for none)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        named = _RESERVATION_NAME.match(line.strip())
        if named is None:
            continue
        nodes = _RESERVATION_NODES.search(line)
        expression = nodes.group(1) if nodes is not None else ""
        found[named.group(1)] = "" if expression == "(null)" else expression
    return found


@dataclass(frozen=True)
class SlurmView:
    """What Slurm says: its nodes, and the gate's reservation (exists, and its nodes)."""

    nodes: Mapping[str, NodeView]
    reservation_exists: bool
    reservation: frozenset[str]


@dataclass
class GateReport:
    """What a sweep decided and did: `applied` changes, `failed` ones with Slurm's answer, and the
    nodes left alone (ownership). In a dry run nothing is applied: `planned` lists the changes."""

    dry_run: bool
    devices: int = 0
    planned: list[GateChange] = field(default_factory=list)
    applied: list[GateChange] = field(default_factory=list)
    failed: list[tuple[GateChange, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What a person reads (`fleet-agent gate`)."""
        verb = "would " if self.dry_run else ""
        out = [f"{verb}{c.describe()}" for c in (self.planned if self.dry_run else self.applied)]
        out += [f"FAILED {c.describe()}: {why}" for c, why in self.failed]
        out += self.skipped
        if not self.planned:
            out.append(f"nothing to change ({self.devices} device(s))")
        return out


class SlurmGate:
    """The thin side: read Slurm's nodes and the gate's reservation, apply one change. Every call is a
    Slurm command-line tool with a timeout; none goes through a shell."""

    def __init__(
        self,
        settings: SlurmSettings,
        *,
        users: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        timeout_s: float = _TOOL_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.reservation_name = settings.reservation or DEFAULT_RESERVATION
        self.users = list(users) or [getpass.getuser()]
        self._environ = dict(os.environ if environ is None else environ)
        self._timeout_s = timeout_s

    # --- reading ----------------------------------------------------------------------------------

    def read(self) -> SlurmView:
        """Slurm's nodes, with `reserved` set for a node in any other reservation — listed, not only
        active: Slurm refuses to put a node in two reservations whose times overlap, and the gate's
        lasts from now on (the node's own RESERVED flag shows only active ones, and only once slurmctld
        has looked)."""
        nodes = parse_nodes(self._ok(["scontrol", "show", "node", "-o"]))
        reservations = parse_reservations(self._ok(["scontrol", "show", "reservation", "-o"]))
        ours = reservations.pop(self.reservation_name, None)
        elsewhere = self._hostnames(",".join(e for e in reservations.values() if e))
        nodes = {
            name: replace(view, reserved=True) if name in elsewhere and not view.reserved else view
            for name, view in nodes.items()
        }
        return SlurmView(nodes, ours is not None, self._hostnames(ours or ""))

    def _hostnames(self, expression: str) -> frozenset[str]:
        """`n[1,3-4],gpu-a01-[01-02]` → its node names (Slurm's own hostlist expansion)."""
        if not expression:
            return frozenset()
        listed = self._ok(["scontrol", "show", "hostnames", expression]).splitlines()
        return frozenset(line.strip() for line in listed) - {""}

    # --- writing ----------------------------------------------------------------------------------

    def drain(self, node: str, reason: str) -> str | None:
        return self._do(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])

    def resume(self, node: str) -> str | None:
        return self._do(["scontrol", "update", f"NodeName={node}", "State=RESUME"])

    def set_reservation(self, exists: bool, nodes: Sequence[str]) -> str | None:
        """Create, update or delete the gate's reservation so that it holds exactly `nodes`."""
        name = f"ReservationName={self.reservation_name}"
        if not nodes:
            return self._do(["scontrol", "delete", name]) if exists else None
        listed = f"Nodes={','.join(nodes)}"
        if exists:
            return self._do(["scontrol", "update", name, listed])
        return self._do(
            [
                "scontrol", "create", "reservation", name, listed, "StartTime=now", "Duration=UNLIMITED",
                f"Users={','.join(self.users)}", "Flags=IGNORE_JOBS",
            ]
        )  # fmt: skip

    # --- internals --------------------------------------------------------------------------------

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return slurm_tool(argv, bin_dir=self.settings.bin_dir, env=self._environ, timeout_s=self._timeout_s)

    def _ok(self, argv: list[str]) -> str:
        done = self._run(argv)
        if done.returncode != 0:
            raise GateError(f"{' '.join(argv[:3])}: {_said(done)}")
        return done.stdout

    def _do(self, argv: list[str]) -> str | None:
        """None when Slurm took the change, else what it said."""
        done = self._run(argv)
        return None if done.returncode == 0 else _said(done)


def _said(done: subprocess.CompletedProcess[str]) -> str:
    text = " ".join((done.stderr or done.stdout or "").split())
    return (text[:300] or f"exit status {done.returncode}").strip()


def node_states(client: FleetClient, site: str, satellite: str) -> list[dict[str, Any]]:
    """Every page of the satellite's node states (raises on any failure: a partial list is never used)."""
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = client.node_states(site, satellite, _PAGE_LIMIT, cursor)
        found.extend(page["results"])
        cursor = page.get("next_cursor")
        if not cursor:
            return found
    raise GateError(f"the service's node states did not end after {_MAX_PAGES} pages")


def gate_devices(states: Sequence[Mapping[str, Any]], settings: SlurmSettings) -> list[GatedDevice]:
    devices = []
    for item in states:
        try:
            state = DeviceState(str(item["state"]))
        except ValueError:
            logger.warning("node gate: device %s has state %r, unknown to this agent: left alone", item, item["state"])
            continue
        hostname = str(item["hostname"])
        # unchecked here: the plan leaves a name outside Slurm's grammar alone (`slurm_node_name_problem`)
        devices.append(GatedDevice(hostname, settings.mapped_node(hostname), state, str(item.get("why") or "")))
    return devices


def gate_sweep(client: FleetClient, gate: SlurmGate, *, site: str, satellite: str, dry_run: bool = False) -> GateReport:
    """Load (the service's states, then Slurm's view), decide (`gate_plan`), write (`apply`)."""
    devices = gate_devices(node_states(client, site, satellite), gate.settings)
    view = gate.read()
    plan = gate_plan(devices, view.nodes, view.reservation)
    report = GateReport(dry_run=dry_run, devices=len(devices), planned=list(plan.changes))
    left: dict[str, int] = dict.fromkeys(NodeGateSkip.values, 0)
    for skipped in plan.skipped:
        left[skipped.skip.value] += 1
        report.skipped.append(skipped.describe())
        logger.info("node gate: %s", skipped.describe())
    for why, count in left.items():
        metrics.NODE_GATE_LEFT_ALONE.labels(why).set(count)
    if dry_run:
        for change in plan.changes:
            logger.info("node gate (dry run): would %s", change.describe())
            metrics.NODE_GATE_CHANGES.labels(change.action.value, "dry_run").inc()
        return report
    apply(plan, view, gate, report)
    return report


def apply(plan: GatePlan, view: SlurmView, gate: SlurmGate, report: GateReport) -> None:
    """Drains first, then the reservation's node list (one update), then resumes. When the reservation
    could not be set, a node that should be held is not resumed: it stays out of production drained."""

    def done(change: GateChange, error: str | None) -> None:
        if error is None:
            report.applied.append(change)
            logger.info("node gate: %s", change.describe())
            metrics.NODE_GATE_CHANGES.labels(change.action.value, "applied").inc()
        else:
            report.failed.append((change, error))
            logger.error("node gate: could not %s: %s", change.describe(), error)
            metrics.NODE_GATE_CHANGES.labels(change.action.value, "failed").inc()

    for change in plan.of(NodeGateAction.DRAIN):
        done(change, gate.drain(change.node, change.reason))
    moved = plan.reservation_changes
    held_ok = True
    if moved:
        error = gate.set_reservation(view.reservation_exists, plan.reservation)
        held_ok = error is None
        for change in moved:
            done(change, error)
    for change in plan.of(NodeGateAction.RESUME):
        if not held_ok and change.state not in PRODUCTION_STATES:
            done(change, f"not resumed: reservation {gate.reservation_name} could not be set")
            continue
        done(change, gate.resume(change.node))
