"""`fleet-agent run|once`: the satellite agent's command line (names kept stable, DESIGN §7)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from fleet_agent import __version__, metrics
from fleet_agent.client import ApiError, FleetClient, Unreachable
from fleet_agent.config import EXECUTORS, AgentConfig, ConfigError, load_config
from fleet_agent.executors.base import Executor
from fleet_agent.logs import configure
from fleet_agent.node_gate import GateError, SlurmGate
from fleet_agent.runner import Agent
from fleet_agent.state import AgentState

logger = logging.getLogger("fleet_agent")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleet-agent", description="The fleet-burnin satellite agent.")
    parser.add_argument("--version", action="version", version=f"fleet-agent {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("run", "every loop, forever, until SIGTERM/SIGINT"),
        ("once", "one pass of every loop, then exit (non-zero on failure)"),
        ("gate", "one sweep of the Slurm node gate, then exit: print what it changed (--dry-run: would change)"),
    ):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--api", help="Service URL (FLEET_AGENT_API)")
        sub.add_argument("--site", help="Site slug (FLEET_AGENT_SITE)")
        sub.add_argument("--satellite", help="Satellite name (FLEET_AGENT_SATELLITE)")
        sub.add_argument("--client-id", help="OAuth2 client id (FLEET_AGENT_CLIENT_ID)")
        sub.add_argument("--client-secret", help="OAuth2 client secret (FLEET_AGENT_CLIENT_SECRET)")
        sub.add_argument("--executor", choices=list(EXECUTORS), help="(FLEET_AGENT_EXECUTOR)")
        sub.add_argument("--seed", type=int, help="Simulated executor seed (FLEET_AGENT_SEED)")
        sub.add_argument("--time-scale", type=float, help="Simulated time factor, 0 = no waiting")
        sub.add_argument("--faulty-share", type=float, help="Simulated share of faulty devices")
        sub.add_argument("--errored-share", type=float, help="Simulated share of runs that error")
        sub.add_argument(
            "--fabric-faults", help="Simulated: comma-separated hostnames whose fabric fault fails every collective"
        )
        sub.add_argument(
            "--health-faults",
            help="Simulated: host:kind[=code],… (xid, ecc, remap, slowdown, reset, ras, flap, symbol) that only the "
            "health-window test sees",
        )
        sub.add_argument(
            "--gpu-vendors", help="Who made each class's GPUs: gpu.mi300x.8x=amd,… (FLEET_AGENT_GPU_VENDORS)"
        )
        sub.add_argument("--concurrency", type=int, help="Jobs run at once (FLEET_AGENT_CONCURRENCY)")
        sub.add_argument("--state-dir", help="Where the agent keeps crash-recovery state")
        sub.add_argument("--config", help="A TOML or YAML file with the same keys")
        sub.add_argument("--log-format", choices=["text", "json"])
        sub.add_argument(
            "--metrics-port", type=int, help="Serve Prometheus metrics on this port (FLEET_AGENT_METRICS_PORT)"
        )
        sub.add_argument("--metrics-host", help="Address the metrics endpoint binds (default 127.0.0.1)")
        sub.add_argument("--log-level", help="DEBUG, INFO, WARNING, ...")
        sub.add_argument(
            "--dry-run",
            action="store_true",
            default=None,
            help="The Slurm node gate prints the changes it would make and makes none (FLEET_AGENT_DRY_RUN)",
        )
    return parser


def make_executor(config: AgentConfig, state: AgentState | None = None) -> Executor:
    if config.executor == "slurm":
        from fleet_agent.executors.slurm import SlurmExecutor

        return SlurmExecutor(
            config.commands,
            config.slurm_settings(),
            timeout_s=config.command_timeout,
            ledger=state,
            hardware_commands=config.hardware_commands,
            remedy_commands=config.remedy_commands,
        )
    if config.executor == "command":
        from fleet_agent.executors.command import CommandExecutor

        return CommandExecutor(
            config.commands,
            timeout_s=config.command_timeout,
            hardware_commands=config.hardware_commands,
            remedy_commands=config.remedy_commands,
        )
    from fleet_agent.executors.simulated import SIMULATED_REPAIRS, SimulatedExecutor
    from fleet_agent.executors.simulated_hardware import SIMULATED_SWAPS, parse_health_faults

    return SimulatedExecutor(
        seed=config.seed,
        faulty_share=config.faulty_share,
        transient_share=config.transient_share,
        errored_share=config.errored_share,
        slow_share=config.slow_share,
        time_scale=config.time_scale,
        fabric_faults=frozenset(h.strip() for h in config.fabric_faults.split(",") if h.strip()),
        repairs_file=Path(config.state_dir) / SIMULATED_REPAIRS,
        health_faults=parse_health_faults(config.health_faults),
        swaps_file=Path(config.state_dir) / SIMULATED_SWAPS,
    )


def make_gate(config: AgentConfig) -> SlurmGate | None:
    if not config.node_gate:
        return None
    users = [user.strip() for user in config.node_gate_users.split(",") if user.strip()]
    return SlurmGate(config.slurm_settings(), users=users)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags: dict[str, Any] = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    if args.command == "gate":
        flags["node_gate"] = True
    try:
        config = load_config(flags, file=args.config)
    except ConfigError as exc:
        print(f"fleet-agent: {exc}", file=sys.stderr)  # noqa: T201 - before logging is configured
        return 2
    configure(config.log_format, config.log_level)
    client = FleetClient(
        config.api,
        config.client_id,
        config.client_secret,
        timeout=config.request_timeout,
        max_retries=config.max_retries,
    )
    state = AgentState(config.state_dir)
    try:
        executor = make_executor(config, state)
    except ValueError as exc:
        print(f"fleet-agent: {exc}", file=sys.stderr)  # noqa: T201 - a configuration error, like those above
        client.close()
        return 2
    agent = Agent(config, client, executor, state, make_gate(config))
    metrics_server = None
    if config.metrics_port:
        try:
            metrics_server = metrics.serve(
                config.metrics_host,
                config.metrics_port,
                version=__version__,
                site=config.site,
                satellite=config.satellite,
            )
        except OSError as exc:
            where = f"{config.metrics_host}:{config.metrics_port}"
            print(f"fleet-agent: metrics_port: cannot listen on {where}: {exc}", file=sys.stderr)  # noqa: T201
            client.close()
            return 2
        logger.info("metrics on http://%s:%d/metrics", config.metrics_host, config.metrics_port)

    def on_signal(signum: int, _frame: object) -> None:
        logger.info("received %s: finishing the report in flight, then exiting", signal.Signals(signum).name)
        agent.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    logger.info(
        "fleet-agent %s for %s/%s against %s (%s executor)",
        __version__,
        config.site,
        config.satellite,
        config.api,
        config.executor,
    )
    try:
        if args.command == "gate":
            gated = agent.gate_nodes()
            for line in gated.lines():
                print(line)  # noqa: T201 - what the command is for
            return 1 if gated.failed else 0
        if args.command == "once":
            report = agent.once()
            logger.info(
                "pass done: %d job(s), %d execution(s), phase 1 %s",
                report.jobs_run,
                report.executions,
                report.evaluated,
            )
            return 1 if agent.stopping else 0
        agent.run()
        return 0
    except (ApiError, Unreachable, GateError) as exc:
        logger.error("%s", exc)
        return 1
    except Exception:
        logger.exception("the pass failed")
        return 1
    finally:
        client.close()
        if metrics_server is not None:
            metrics_server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
