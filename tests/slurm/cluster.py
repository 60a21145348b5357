"""A real, private Slurm cluster on loopback for the tests: munged, slurmctld and one slurmd per fake node.

Everything lives under one temporary folder (configuration, state, spool, logs, the munge socket), the
daemons listen on free loopback ports, and client commands find the cluster through `SLURM_CONF`, so
nothing of the machine's own Slurm or munge setup is read or changed. `stop()` ends only the processes
this object started, by pid.

Fake nodes `n1..nN` all run on this host (`NodeHostname` = the short hostname, `NodeAddr` = 127.0.0.1),
each slurmd with its own spool folder (a shared one breaks task launch). Accounting is off, so job states
are read with `scontrol show job` (kept for `MinJobAge` seconds after a job ends).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["STEP_LOGS", "SlurmCluster", "SlurmTools", "step_summary"]

_START_TIMEOUT_S = 60.0
#: The step log of each cluster this process started for the tests (tests/slurm/conftest.py); the
#: session ends with `step_summary` of them (under pytest-xdist, of every worker's).
STEP_LOGS: list[Path] = []


def step_summary(log: Path) -> str:
    """How many Slurm jobs, steps and tasks the tests ran on one cluster, from its step log."""
    lines = [line.split() for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    jobs = {line[0].split(".")[0] for line in lines}
    steps = {line[0] for line in lines}
    return (
        f"slurm: the tests ran {len(jobs)} Slurm job(s), {len(steps)} step(s), {len(lines)} task(s) "
        f"on nodes {', '.join(sorted({line[1] for line in lines})) or '-'}"
    )


@dataclass(frozen=True)
class SlurmTools:
    """Absolute paths of the binaries the cluster needs."""

    munged: str
    slurmctld: str
    slurmd: str
    scontrol: str
    sinfo: str


def _free_ports(count: int) -> list[int]:
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


@dataclass
class SlurmCluster:
    root: Path
    tools: SlurmTools
    nodes: tuple[str, ...] = ("n1", "n2", "n3", "n4")
    hostname: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    _processes: list[tuple[str, int]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands (sbatch, srun, squeue, scontrol, scancel)."""
        return {"SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        for folder in ("etc", "state", "log", "run", "munge", "spool"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self._start_munged()
        ctld_port, *node_ports = _free_ports(1 + len(self.nodes))
        self._write_conf(ctld_port, node_ports)
        env = os.environ | self.env
        self._spawn("slurmctld", [self.tools.slurmctld, "-D", "-f", str(self.conf)], env)
        self._wait(
            lambda: self._scontrol("ping").returncode == 0 and "UP" in self._scontrol("ping").stdout, "slurmctld"
        )
        for node in self.nodes:
            self._spawn(f"slurmd {node}", [self.tools.slurmd, "-D", "-N", node, "-f", str(self.conf)], env)
        self._wait(self._all_idle, "every slurmd to register")

    def stop(self) -> None:
        """`scontrol shutdown`, then end our daemons by pid (SIGTERM, then SIGKILL if they linger)."""
        with contextlib.suppress(Exception):
            self._scontrol("shutdown")
        for _name, pid in reversed(self._processes):
            _end(pid)
        self._processes.clear()

    def logs(self) -> str:
        parts = []
        for log in sorted((self.root / "log").glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    # --- internals ------------------------------------------------------------------------------

    def _start_munged(self) -> None:
        munge_dir = self.root / "munge"
        user = pwd.getpwnam("munge")
        os.chown(munge_dir, user.pw_uid, user.pw_gid)
        socket_path = munge_dir / "munge.socket"
        argv = [
            self.tools.munged,
            "--foreground",
            f"--socket={socket_path}",
            f"--pid-file={munge_dir / 'munged.pid'}",
            f"--log-file={munge_dir / 'munged.log'}",
            f"--seed-file={munge_dir / 'munged.seed'}",
            "--key-file=/etc/munge/munge.key",
        ]
        self._spawn("munged", argv, dict(os.environ), user=user.pw_uid, group=user.pw_gid)
        self._wait(socket_path.exists, "munged's socket")

    def _write_conf(self, ctld_port: int, node_ports: list[int]) -> None:
        root, munge_socket = self.root, self.root / "munge" / "munge.socket"
        names = ",".join(self.nodes)
        lines = [
            "ClusterName=fleettest",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdSpoolDir={root / 'spool' / '%n'}",
            f"SlurmdPidFile={root / 'run' / 'slurmd-%n.pid'}",
            f"SlurmdLogFile={root / 'log' / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # Fast turnaround: a time limit is enforced within seconds of being reached.
            "KillWait=2",
            "OverTimeLimit=0",
            "MessageTimeout=10",
            "InactiveLimit=0",
            "MinJobAge=600",
            "SchedulerType=sched/backfill",
            # `scontrol reboot` needs one (the remediation ladder's reboot); the tests cancel every reboot they ask
            # while a job still holds the node, so it never runs (tests/slurm/test_remedy_reboot.py).
            "RebootProgram=/bin/true",
        ]
        lines += [
            f"NodeName={node} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={port} CPUs=1 RealMemory=512 "
            "State=UNKNOWN"
            for node, port in zip(self.nodes, node_ports, strict=True)
        ]
        lines.append(f"PartitionName=burnin Nodes={names} Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        for node in self.nodes:
            (root / "spool" / node).mkdir(parents=True, exist_ok=True)

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str], *, user: int | None = None, group: int | None = None
    ) -> None:
        log = open(self.root / "log" / f"{name.replace(' ', '-')}.out", "ab")  # noqa: SIM115 - the child owns it
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=user,
            group=group,
        )
        log.close()
        self._processes.append((name, process.pid))

    def _scontrol(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.tools.scontrol, *args],
            env=os.environ | self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def _all_idle(self) -> bool:
        done = subprocess.run(
            [self.tools.sinfo, "-h", "-N", "-o", "%N %t"],
            env=os.environ | self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        return all(states.get(node) == "idle" for node in self.nodes)

    def _wait(self, ready, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            for name, pid in self._processes:
                if not _alive(pid):
                    raise RuntimeError(f"{name} exited while waiting for {what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return finished == 0


def _end(pid: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if not _alive(pid):
            break
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def find_tools() -> SlurmTools:  # pragma: no cover - convenience for manual runs
    return SlurmTools(*(shutil.which(name) or name for name in ("munged", "slurmctld", "slurmd", "scontrol", "sinfo")))
