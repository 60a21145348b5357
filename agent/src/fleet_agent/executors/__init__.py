"""Executors run burn-in tests for the agent: `SimulatedExecutor` models a fleet, `CommandExecutor` runs tools."""

from fleet_agent.executors.base import Executor, Target, TestOutcome, TestRun
from fleet_agent.executors.command import CommandExecutor, CommandSpec
from fleet_agent.executors.simulated import Fault, SimulatedExecutor

__all__ = [
    "CommandExecutor",
    "CommandSpec",
    "Executor",
    "Fault",
    "SimulatedExecutor",
    "Target",
    "TestOutcome",
    "TestRun",
]
