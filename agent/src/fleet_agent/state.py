"""What the agent must remember across a crash: executions it reported `running` but never
finished, the jobs it held, and how many times it ran each (requirement, target).

Written atomically (temporary file + rename) after every change, so a SIGKILL at any moment
leaves either the old or the new state on disk, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any


class AgentState:
    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "state.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {"attempts": {}, "in_flight": {}, "jobs": {}}
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
            if self._data["in_flight"].pop(execution_id, None) is not None:
                self._save()

    def in_flight(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._data["in_flight"])

    def job_started(self, job_id: str) -> None:
        with self._lock:
            self._data["jobs"][job_id] = "running"
            self._save()

    def job_finished(self, job_id: str) -> None:
        with self._lock:
            if self._data["jobs"].pop(job_id, None) is not None:
                self._save()

    def held_jobs(self) -> list[str]:
        with self._lock:
            return list(self._data["jobs"])
