"""The agent is its own program: importing all of it loads no Django and nothing of the service."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process


def test_the_agent_imports_no_django_and_nothing_of_the_service():
    script = (
        "import json, sys\n"
        "import fleet_agent.cli, fleet_agent.runner, fleet_agent.client\n"
        "import fleet_agent.executors.simulated, fleet_agent.executors.command, fleet_agent.executors.slurm\n"
        "service = ('django', 'rest_framework', 'fleet')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in service)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(result.stdout) == []


def test_the_console_script_answers():
    result = subprocess.run(
        [sys.executable, "-m", "fleet_agent", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stdout.startswith("fleet-agent ")
