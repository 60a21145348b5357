"""What the agent must remember across a crash: executions it reported `running` but never
finished, the jobs it held (with their lease length), how many times it ran each (requirement, target),
and the runs an executor handed to another system (a Slurm job id and where its output goes).

Written atomically (temporary file + rename) after every change, so a SIGKILL at any moment
leaves either the old or the new state on disk, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class AgentState:
    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "state.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {"attempts": {}, "in_flight": {}, "jobs": {}, "remote": {}}
        if self.path.exists():
            loaded = json.loads(self.path.read_text() or "{}")
            for key in self._data:
                self._data[key].update(loaded.get(key, {}))

    def _save(self) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".state-", suffix=".json")
        with os.fdopen(handle, "w") as out:
            json.dump(self._data, out, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    def next_attempt(self, requirement: str, target_id: str) -> int:
        with self._lock:
            key = f"{requirement}/{target_id}"
            attempt = int(self._data["attempts"].get(key, 0)) + 1
            self._data["attempts"][key] = attempt
            self._save()
            return attempt

    def execution_started(self, execution_id: str, report: dict[str, Any]) -> None:
        with self._lock:
            self._data["in_flight"][execution_id] = report
            self._save()

    def execution_finished(self, execution_id: str) -> None:
        with self._lock:
            dropped = self._data["in_flight"].pop(execution_id, None) is not None
            dropped |= self._data["remote"].pop(execution_id, None) is not None
            if dropped:
                self._save()

    def in_flight(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._data["in_flight"])

    def job_started(self, job_id: str, lease_seconds: float | None = None) -> None:
        with self._lock:
            self._data["jobs"][job_id] = {"lease_seconds": lease_seconds}
            self._save()

    def lease_seconds(self, job_id: str) -> float | None:
        """The lease length recorded for a held job (None when unknown, e.g. a state file from before)."""
        with self._lock:
            held = self._data["jobs"].get(job_id)
            value = held.get("lease_seconds") if isinstance(held, dict) else None
            return float(value) if isinstance(value, int | float) else None

    def job_finished(self, job_id: str) -> None:
        with self._lock:
            if self._data["jobs"].pop(job_id, None) is not None:
                self._save()

    def held_jobs(self) -> list[str]:
        with self._lock:
            return list(self._data["jobs"])

    # --- runs handed to another system (RunLedger) ------------------------------------------------

    def remote_started(self, execution_id: str, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._data["remote"][execution_id] = dict(record)
            self._save()

    def remote_finished(self, execution_id: str) -> None:
        with self._lock:
            if self._data["remote"].pop(execution_id, None) is not None:
                self._save()

    def remote_runs(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {key: dict(value) for key, value in self._data["remote"].items()}
