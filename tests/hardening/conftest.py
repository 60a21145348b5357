"""Fixtures of the hardening tests."""

from tests.burnin.test_executions import setting  # noqa: F401  (a fixture these tests share)
