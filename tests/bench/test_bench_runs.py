"""`make bench` runs on a fresh clone: the bench signs the certificates its reconcile issues with a
key of its own (minted under FLEET_CERTIFICATE_KEY_FILE when absent, published in its throwaway
database), since the service no longer mints a key as a side effect (docs/security.md). The same run
takes the bring-up part after the others, as `make bench` does: its halls need a database without
the bench fleet's policies (they share resource classes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO, fleet_env

pytestmark = [pytest.mark.process, pytest.mark.django_db]


def test_the_bench_reconciles_and_certifies_without_a_key_made_beforehand(tmp_path):
    key = tmp_path / "bench" / "certificate_key.pem"
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "bench/run.py", "--scale", "0.02", "--parts", "reconcile,bringup", "--no-http", "--runs", "1"]
        + ["--bringup-processes", "off", "--results", str(results)],
        cwd=REPO,
        env=fleet_env(FLEET_CERTIFICATE_KEY_FILE=str(key)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert key.exists(), "the bench minted its own key where FLEET_CERTIFICATE_KEY_FILE points"
    figures = json.loads(results.read_text())
    assert figures["reconcile_targets_per_s"] > 0  # the sweeps ran, certificates issued in their pages
    # the bring-up ran to its end after them: every device without a fault accepted, none with one
    assert figures["bringup_time_vs_lower_bound"] >= 1.0
    assert figures["bringup_escapes"] == 0
