"""The node gate: what a scheduler must do to each node so that only devices in service take
production work (docs/agent.md, "The Slurm node gate").

A pure function of the devices' lifecycle states and what the scheduler says about their nodes; the
agent reads both, asks `gate_plan` and applies the changes it returns, in their order. Held back
from production:

* every state but `in_service` is **held** in fleet-burnin's reservation, from which only burn-in
  jobs (submitted with that reservation) start: the tests still run on the node, nothing else does;
* `needs_repair` and `decommissioned` are also **drained** with a reason that starts with
  `fleet-burnin:` and says why — no job at all starts on broken or retired hardware;
* `in_service` is released from the reservation and its fleet-burnin drain is resumed.

Ownership: the gate acts only on what is its own. A node whose reason is someone else's (an
operator's drain, Slurm's own `Not responding`) is never resumed and never given another reason;
a node in someone else's reservation is never taken into fleet-burnin's (nor, while it stays
there, resumed into it). Nodes of the reservation that belong to no device the gate knows stay
in it. Every such decision is listed in `skipped`, so it can be logged and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleet_rules.vocabulary import DeviceState, NodeGateAction, NodeGateSkip

__all__ = [
    "DRAINED_STATES",
    "PRODUCTION_STATES",
    "REASON_MAX",
    "REASON_PREFIX",
    "GateChange",
    "GatePlan",
    "GateSkipped",
    "GatedDevice",
    "NodeView",
    "drain_reason",
    "gate_plan",
    "is_gate_reason",
    "reboot_refusal",
    "slurm_node_name_problem",
]

#: Every reason the gate writes starts with this; a reason that does not is someone else's.
REASON_PREFIX = "fleet-burnin:"
#: Slurm keeps a reason whole, but `sinfo` and people read the first few dozen characters.
REASON_MAX = 120

#: The only state whose node takes production work.
PRODUCTION_STATES: frozenset[DeviceState] = frozenset({DeviceState.IN_SERVICE})
#: States whose node is drained as well as held: no job at all, burn-in included, may start there.
DRAINED_STATES: frozenset[DeviceState] = frozenset({DeviceState.NEEDS_REPAIR, DeviceState.DECOMMISSIONED})

_UNSAFE = re.compile(r"[^\x20-\x7e]|[\[\]\"'`\\]")

#: Slurm's node names as its own tools take them (a host name: letters, digits, `.`, `_`, `-`, not
#: starting with `-` or `.`, at most 64). Anything else — a newline, a space, a shell or hostlist
#: character (`;`, `$`, `,`, `[`) — would change what a batch script or an `scontrol` line means.
SLURM_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def slurm_node_name_problem(name: str) -> str | None:
    """Why `name` cannot be written as a Slurm node name, or None: the one rule the Slurm executor
    (scripts, `--nodelist`) and the node gate (`scontrol`) both hold a name to."""
    if SLURM_NODE_NAME.fullmatch(name) is None:
        return f"{name!r} is not a Slurm node name (letters, digits, '.', '_', '-'; at most 64)"
    return None


_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class GatedDevice:
    """A device as the gate sees it: its scheduler node, its lifecycle state and (in
    `needs_repair`) the short why the service gives."""

    hostname: str
    node: str
    state: DeviceState
    why: str = ""


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the scheduler says about a node: drained (or draining), down, its reason ("" when none)
    and whether an active reservation holds it (any reservation: the gate's own membership is
    passed separately)."""

    name: str
    drained: bool = False
    down: bool = False
    reason: str = ""
    reserved: bool = False


@dataclass(frozen=True, slots=True)
class GateChange:
    action: NodeGateAction
    node: str
    hostname: str
    state: DeviceState
    reason: str = ""  # the drain's reason (drain only)

    def describe(self) -> str:
        what = f"{self.action.value} {self.node} ({self.hostname}: {self.state.value})"
        return f'{what} reason="{self.reason}"' if self.reason else what


@dataclass(frozen=True, slots=True)
class GateSkipped:
    skip: NodeGateSkip
    node: str
    hostname: str
    state: DeviceState
    detail: str = ""  # the other reason, for the log

    def describe(self) -> str:
        said = f": {self.detail}" if self.detail else ""
        return f"left {self.node} ({self.hostname}: {self.state.value}) alone, {self.skip.value}{said}"


@dataclass(frozen=True, slots=True)
class GatePlan:
    """The changes in the order they must be applied — drains, then the reservation's holds and
    releases (one update of its node list), then resumes — so a node that leaves a drain for
    burn-in is in the reservation before it can take a job."""

    changes: tuple[GateChange, ...]
    skipped: tuple[GateSkipped, ...]
    reservation: tuple[str, ...]  # the reservation's nodes once applied, sorted

    def of(self, action: NodeGateAction) -> tuple[GateChange, ...]:
        return tuple(c for c in self.changes if c.action == action)

    @property
    def reservation_changes(self) -> tuple[GateChange, ...]:
        return tuple(c for c in self.changes if c.action in (NodeGateAction.HOLD, NodeGateAction.RELEASE))


def is_gate_reason(reason: str) -> bool:
    return reason.strip().startswith(REASON_PREFIX)


def reboot_refusal(node: NodeView | None) -> str | None:
    """Why the remediation ladder may not reboot this node (None: it may). The gate's ownership rules: a node
    drained or down with someone else's reason (an operator's drain, Slurm's `Not responding`) is theirs, and
    one the scheduler does not know is nobody's to reboot."""
    if node is None:
        return "the scheduler does not know the node"
    if (node.drained or node.down) and node.reason and not is_gate_reason(node.reason):
        return f"the node is {'down' if node.down else 'drained'} by someone else ({node.reason}): not rebooted"
    return None


def drain_reason(state: DeviceState, why: str = "") -> str:
    """`fleet-burnin: needs repair: gpu-diag failed 3 times ...`, printable ASCII without quotes or
    brackets (the text comes from machines under test), at most `REASON_MAX` characters."""
    text = f"{REASON_PREFIX} {state.value.replace('_', ' ')}"
    said = _SPACES.sub(" ", _UNSAFE.sub(" ", why)).strip()
    if said:
        text = f"{text}: {said}"
    if len(text) > REASON_MAX:
        text = text[: REASON_MAX - 3].rstrip() + "..."
    return text


def _rank(state: DeviceState) -> int:
    if state in DRAINED_STATES:
        return 2
    return 0 if state in PRODUCTION_STATES else 1


def gate_plan(devices: Iterable[GatedDevice], nodes: Mapping[str, NodeView], reservation: Iterable[str]) -> GatePlan:
    """The changes that bring the scheduler in line with the devices' states.

    `nodes`: the scheduler's nodes by name; `reservation`: the nodes of fleet-burnin's reservation
    now (empty when it does not exist). Two devices on one node (a mapping mistake): the node gets
    the stricter of the two states."""
    by_node: dict[str, GatedDevice] = {}
    for device in devices:
        seen = by_node.get(device.node)
        if seen is None or (_rank(device.state), device.hostname) > (_rank(seen.state), seen.hostname):
            by_node[device.node] = device
    held_now = frozenset(reservation)
    drains: list[GateChange] = []
    moves: list[GateChange] = []
    resumes: list[GateChange] = []
    skipped: list[GateSkipped] = []
    for name in sorted(by_node):
        device = by_node[name]
        view = nodes.get(name)

        def change(action: NodeGateAction, reason: str = "", d: GatedDevice = device) -> GateChange:
            return GateChange(action, d.node, d.hostname, d.state, reason)

        def skip(why: NodeGateSkip, detail: str = "", d: GatedDevice = device) -> GateSkipped:
            return GateSkipped(why, d.node, d.hostname, d.state, detail)

        if slurm_node_name_problem(name) is not None:
            skipped.append(skip(NodeGateSkip.NOT_A_NODE_NAME, slurm_node_name_problem(name) or ""))
            continue
        if view is None:
            skipped.append(skip(NodeGateSkip.NOT_IN_SLURM))
            continue
        ours = is_gate_reason(view.reason)
        foreign_reason = bool(view.reason.strip()) and not ours
        in_ours = name in held_now
        foreign_reservation = view.reserved and not in_ours

        if device.state in PRODUCTION_STATES:
            if in_ours:
                moves.append(change(NodeGateAction.RELEASE))
            if ours:
                resumes.append(change(NodeGateAction.RESUME))
            elif foreign_reason:
                skipped.append(skip(NodeGateSkip.FOREIGN_REASON, view.reason))
            continue

        if foreign_reservation:
            skipped.append(skip(NodeGateSkip.FOREIGN_RESERVATION, "in another reservation"))
        elif not in_ours:
            moves.append(change(NodeGateAction.HOLD))
        if device.state in DRAINED_STATES:
            wanted = drain_reason(device.state, device.why)
            if foreign_reason:
                skipped.append(skip(NodeGateSkip.FOREIGN_REASON, view.reason))
            elif not (view.drained and view.reason.strip() == wanted):
                drains.append(change(NodeGateAction.DRAIN, wanted))
        elif ours and not foreign_reservation:
            resumes.append(change(NodeGateAction.RESUME))  # back to burn-in: held, so it takes burn-in jobs only
        elif foreign_reason and view.drained:
            skipped.append(skip(NodeGateSkip.FOREIGN_REASON, view.reason))

    held_after = (held_now | {c.node for c in moves if c.action == NodeGateAction.HOLD}) - {
        c.node for c in moves if c.action == NodeGateAction.RELEASE
    }
    return GatePlan(tuple(drains + moves + resumes), tuple(skipped), tuple(sorted(held_after)))
