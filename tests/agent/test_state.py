"""Crash-recovery state survives a restart and is always whole on disk."""

from __future__ import annotations

import json

from fleet_agent.state import AgentState


def test_state_survives_a_restart(tmp_path):
    state = AgentState(tmp_path)
    assert state.next_attempt("gpu-diag", "d1") == 1
    state.execution_started("e1", {"requirement": "gpu-diag"})
    state.job_started("j1")
    again = AgentState(tmp_path)
    assert again.next_attempt("gpu-diag", "d1") == 2
    assert again.in_flight() == {"e1": {"requirement": "gpu-diag"}}
    assert again.held_jobs() == ["j1"]
    again.execution_finished("e1")
    again.job_finished("j1")
    assert AgentState(tmp_path).in_flight() == {} and AgentState(tmp_path).held_jobs() == []


def test_no_temporary_files_are_left_behind(tmp_path):
    state = AgentState(tmp_path)
    for i in range(5):
        state.next_attempt("r", str(i))
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert json.loads((tmp_path / "state.json").read_text())["attempts"]["r/4"] == 1
