"""The operations files we ship (deploy/): Prometheus alerting rules checked and unit-tested with
promtool, and a Grafana dashboard whose every expression parses and names a metric the service
or the agent exports."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fleet_agent.metrics import REGISTRY as AGENT_REGISTRY
from tests.helpers import REPO
from tests.schema_validation import ValidatingAPIClient
from tests.support.system import require_tool

ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = REPO / "deploy" / "prometheus" / "alerts.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "fleet-burnin.json"
METRIC = re.compile(r"\b(fleet_[a-z0-9_]+)\b")
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
    "summary": ("_count", "_sum", ""),
}


def promtool() -> str:
    return require_tool("promtool", package="prometheus", why="the checks of the shipped alerting rules")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)


def exported_series_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


@pytest.fixture
def exported(db) -> set[str]:
    """Every series name the service's /metrics and the agent's endpoint export (the gauge
    families are there even when the database holds nothing yet)."""
    service = ValidatingAPIClient().get("/metrics").content.decode()
    return exported_series_names(service) | exported_series_names(generate_latest(AGENT_REGISTRY).decode())


def dashboard_expressions() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    found = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    found += [v["definition"] for v in board["templating"]["list"] if v.get("definition")]
    return found


@pytest.mark.process
def test_the_alerting_rules_pass_promtool_check_and_their_unit_tests():
    tool = promtool()
    checked = run(tool, "check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    declared = sum(len(group["rules"]) for group in yaml.safe_load(ALERTS.read_text())["groups"])
    assert declared >= 12 and f"SUCCESS: {declared} rules found" in checked.stdout
    tested = run(tool, "test", "rules", str(ALERT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_alerting_rules_name_only_exported_metrics(exported):
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    names = {name for rule in rules for name in METRIC.findall(rule["expr"])}
    assert names and names <= exported, sorted(names - exported)


def test_every_dashboard_expression_names_an_exported_metric(exported):
    expressions = dashboard_expressions()
    assert len(expressions) > 20
    for expr in expressions:
        names = set(METRIC.findall(expr))
        assert names, f"no fleet metric in {expr!r}"
        assert names <= exported, f"{expr!r} names {sorted(names - exported)}, which nothing exports"


@pytest.mark.process
def test_every_dashboard_expression_is_valid_promql(tmp_path):
    tool = promtool()
    queries = [
        expr.replace("$__rate_interval", "5m").replace("$site", ".*")
        for expr in dashboard_expressions()
        if not expr.startswith("label_values(")
    ]
    rules = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": q} for i, q in enumerate(queries)]}
        ]
    }
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    checked = run(tool, "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
