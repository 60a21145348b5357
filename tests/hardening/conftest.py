"""Fixtures of the hardening tests."""

from tests.burnin.test_executions import setting  # noqa: F401  (a fixture these tests share)
from tests.dashboard.conftest import burnt_in, person  # noqa: F401  (the dashboard's burnt-in site)
