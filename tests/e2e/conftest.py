"""End-to-end fixtures: the example fleet in the test database, a real `fleet serve`, and real
`fleet-agent` processes talking to it over HTTP (they live in tests/support/stack.py, shared with
tests/slurm)."""

from tests.support.stack import Stack, log_lines, sat_a_devices, stack

__all__ = ["Stack", "log_lines", "sat_a_devices", "stack"]
