"""Agent configuration: command-line flags override environment variables, which override a
TOML or YAML file (`--config`), which overrides the defaults."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from fleet_agent.executors.slurm import SlurmSettings
from fleet_agent.node_gate import DEFAULT_RESERVATION

_SLURM = SlurmSettings()


class ConfigError(ValueError):
    """The configuration is incomplete or wrong; the message names the key."""


@dataclass(frozen=True)
class AgentConfig:
    api: str = ""
    site: str = ""
    satellite: str = ""
    client_id: str = ""
    client_secret: str = ""
    executor: str = "simulated"
    seed: int = 0
    time_scale: float = 0.0
    faulty_share: float = 0.15
    transient_share: float = 0.5
    errored_share: float = 0.0
    slow_share: float = 0.05
    fabric_faults: str = ""  # simulated: comma-separated hostnames (or ids) with a permanent fabric fault
    health_faults: str = ""  # simulated: host:kind[=code],… (xid, ecc, remap, slowdown, flap, …) seen by health-window
    concurrency: int = 4
    heartbeat_interval: float = 30.0
    jobs_interval: float = 5.0
    evaluate_interval: float = 10.0
    reconcile_interval: float = 60.0
    page_limit: int = 200
    results_batch: int = 200
    reconcile_limit: int = 500
    deferred_backoff: float = 1.0
    state_dir: str = ".fleet-agent"
    log_format: str = "text"
    metrics_port: int = 0  # 0: no metrics endpoint
    metrics_host: str = "127.0.0.1"
    log_level: str = "INFO"
    request_timeout: float = 30.0
    max_retries: int = 6
    commands: dict[str, Any] = field(default_factory=dict)
    command_timeout: float = 7200.0
    # How the command and Slurm executors read the device's hardware (file only): nvidia_smi, ibstat, dmi, kernel_log,
    # kernel_log_fallback → a command template (or {template, timeout}).
    hardware_commands: dict[str, Any] = field(default_factory=dict)
    # How the command and Slurm executors take the remediation ladder's steps (file only; docs/remediation.md):
    # reset_gpu, reboot, ready → a command template (or {template, timeout}).
    remedy_commands: dict[str, Any] = field(default_factory=dict)
    # Who made each resource class's GPUs (class → nvidia | amd), pinned for this satellite: which tools read a
    # device's inventory, health and kernel log. A class not listed: its policy's `gpu_vendor` at the service, else
    # the simulated executor's own model, else NVIDIA (fleet_agent.targets). From the environment or a flag:
    # `gpu.mi300x.8x=amd,…`.
    gpu_vendors: dict[str, Any] = field(default_factory=dict)
    # Send the inventory (and the health window's evidence) with execution reports.
    report_hardware: bool = True
    # The inventory sweep (fleet_agent.inventory_sweep): read accepted and in-service devices' hardware every
    # this many seconds and report it; 0: off.
    inventory_interval: float = 3600.0
    # The Slurm executor's keys, one per `SlurmSettings` field and with its defaults.
    slurm_partition: str = _SLURM.partition
    slurm_account: str = _SLURM.account
    slurm_reservation: str = _SLURM.reservation
    slurm_qos: str = _SLURM.qos
    slurm_mpi: str = _SLURM.mpi
    slurm_exclusive: bool = _SLURM.exclusive
    slurm_node_names: dict[str, Any] = field(default_factory=dict)
    slurm_node_name: str = _SLURM.node_name
    slurm_output_dir: str = ""  # default: <state_dir>/slurm
    slurm_poll_interval: float = _SLURM.poll_interval
    slurm_pending_timeout: float = _SLURM.pending_timeout
    slurm_time_margin: float = _SLURM.time_margin
    slurm_bin_dir: str = _SLURM.bin_dir
    slurm_on_restart: str = _SLURM.on_restart
    slurm_sbatch_args: str = _SLURM.sbatch_args
    # The Slurm node gate (fleet_agent.node_gate): keep nodes' Slurm states in line with their devices'.
    node_gate: bool = False
    node_gate_interval: float = 60.0
    node_gate_users: str = ""  # comma-separated users the gate's reservation admits (default: the agent's own)
    dry_run: bool = False  # the gate prints the changes it would make and makes none

    def check(self) -> AgentConfig:
        missing = [
            name for name in ("api", "site", "satellite", "client_id", "client_secret") if not getattr(self, name)
        ]
        if missing:
            env = ", ".join(f"--{m.replace('_', '-')} / {ENV_PREFIX}{m.upper()}" for m in missing)
            raise ConfigError(f"missing configuration: {env}")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"executor: {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.executor in ("command", "slurm") and not self.commands:
            raise ConfigError(f"commands: the {self.executor} executor needs a `commands` table in the config file")
        if self.executor == "slurm":
            try:
                self.slurm_settings()
            except ValueError as exc:
                raise ConfigError(str(exc)) from exc
        if self.health_faults:
            from fleet_agent.executors.simulated_hardware import parse_health_faults

            try:
                parse_health_faults(self.health_faults)
            except ValueError as exc:
                raise ConfigError(str(exc)) from exc
        from fleet_agent.gpus import GPU_VENDORS

        for resource_class, vendor in self.gpu_vendors.items():
            if vendor not in GPU_VENDORS:
                known = ", ".join(GPU_VENDORS)
                raise ConfigError(f"gpu_vendors.{resource_class}: {vendor!r} is not a GPU vendor (known: {known})")
        if self.node_gate and self.executor != "slurm":
            raise ConfigError(f"node_gate: needs the slurm executor, not {self.executor}")
        if self.node_gate_interval <= 0:
            raise ConfigError("node_gate_interval: must be positive")
        if self.inventory_interval < 0:
            raise ConfigError("inventory_interval: must be 0 (off) or a positive number of seconds")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"log_format: {self.log_format!r} is not one of text, json")
        if self.concurrency < 1:
            raise ConfigError("concurrency: must be at least 1")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError("metrics_port: must be a TCP port (1-65535), or 0 for none")
        if not 1 <= self.reconcile_limit <= 500:
            raise ConfigError("reconcile_limit: must be between 1 and 500")
        return self

    def slurm_settings(self) -> SlurmSettings:
        """The `slurm_*` keys as the Slurm executor's settings (checked; `ValueError` names the key)."""
        values = {f.name: getattr(self, f"slurm_{f.name}") for f in fields(SlurmSettings)}
        values["node_names"] = dict(values["node_names"])
        values["output_dir"] = values["output_dir"] or str(Path(self.state_dir) / "slurm")
        if self.node_gate and not values["reservation"]:
            # burn-in jobs run in the gate's reservation: the only place its held nodes take jobs
            values["reservation"] = DEFAULT_RESERVATION
        return SlurmSettings(**values).check()


ENV_PREFIX = "FLEET_AGENT_"
EXECUTORS = ("simulated", "command", "slurm")
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in fields(AgentConfig)}[name]
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in _TRUE | _FALSE:
                raise ValueError(text)
            return text in _TRUE
        if kind.startswith("dict"):
            if name in _PAIRS and isinstance(value, str):
                return _pairs(name, value)
            if not isinstance(value, dict):
                raise ConfigError(f"{name}: must be a table/mapping")
            return value
        return str(value)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: {value!r} is not a valid {kind}") from exc


def _is_table(name: str) -> bool:
    """A table only a file can give (`gpu_vendors` also comes as `key=value,…` from a flag or the environment)."""
    return {f.name: f.type for f in fields(AgentConfig)}[name].startswith("dict") and name not in _PAIRS


#: Tables that a flag or the environment may give as `key=value,…`.
_PAIRS = frozenset({"gpu_vendors"})


def _pairs(name: str, text: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        key, equals, value = entry.partition("=")
        if not equals or not key.strip() or not value.strip():
            raise ConfigError(f"{name}: {entry!r} is not <resource_class>=<vendor>")
        table[key.strip()] = value.strip()
    return table


#: The service's rule for YAML (fleet.core.yamlfiles), in the agent's own code (it imports nothing
#: of the service): no anchors or aliases (a few hundred bytes of nested aliases expand to billions
#: of nodes), a bounded size and depth.
MAX_CONFIG_BYTES = 1024 * 1024
MAX_YAML_DEPTH = 64


class _NoAliasLoader(yaml.SafeLoader):
    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML has no annotations
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ConfigError(f"anchors and aliases are not allowed (line {line})")
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise ConfigError(f"nested deeper than {MAX_YAML_DEPTH} levels (line {line})")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(text: str) -> Any:
    """The document's value, or ConfigError for anchors, aliases, depth or size (the caller says
    which file)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"the file is {size} bytes; at most {MAX_CONFIG_BYTES} are read")
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else load_yaml(text)
    except ConfigError as exc:
        raise ConfigError(f"config: {path}: {exc}") from exc
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"config: {path} is not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config: {path} must hold a table of settings")
    return {key.replace("-", "_"): value for key, value in data.items()}


def load_config(flags: dict[str, Any], environ: dict[str, str] | None = None, file: str | None = None) -> AgentConfig:
    """Merge defaults < file < environment < flags (flags given as None are ignored)."""
    environ = dict(os.environ if environ is None else environ)
    known = {f.name for f in fields(AgentConfig)}
    merged: dict[str, Any] = {}
    if file:
        for key, value in read_file(file).items():
            if key not in known:
                raise ConfigError(f"config: unknown key {key!r} in {file}")
            merged[key] = value
    for name in known:
        raw = environ.get(f"{ENV_PREFIX}{name.upper()}")
        if raw is not None and not _is_table(name):
            merged[name] = raw
    merged.update({k: v for k, v in flags.items() if v is not None and k in known})
    return AgentConfig(**{k: _coerce(k, v) for k, v in merged.items()}).check()
