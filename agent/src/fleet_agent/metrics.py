"""The agent's own Prometheus metrics, served on `--metrics-port` (prometheus-client, a registry
of the agent's own; nothing of the service). Names are kept stable like the service's."""

from __future__ import annotations

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, start_http_server

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)

INFO = Gauge(
    "fleet_agent_info",
    "Always 1: the agent's version and who it acts as.",
    ["version", "site", "satellite"],
    registry=REGISTRY,
)
JOBS = Counter("fleet_agent_jobs", "Jobs the agent ran, by how they ended.", ["outcome"], registry=REGISTRY)
EXECUTIONS = Counter(
    "fleet_agent_executions", "Executions the agent reported finished, by status.", ["status"], registry=REGISTRY
)
RETRIES = Counter(
    "fleet_agent_requests_retried",
    "Requests to the service sent again after a transient failure (connection, 429, 5xx), by why.",
    ["reason"],
    registry=REGISTRY,
)
SWEEPS = Counter(
    "fleet_agent_sweeps", "Reconcile sweeps run to their end, by resource class.", ["resource_class"], registry=REGISTRY
)
SWEEP_SECONDS = Histogram(
    "fleet_agent_sweep_duration_seconds",
    "How long a whole reconcile sweep of one resource class took.",
    ["resource_class"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
    registry=REGISTRY,
)
LAST_CONTACT = Gauge(
    "fleet_agent_last_contact_timestamp_seconds",
    "Unix time of the service's last answer that was not a transient failure.",
    registry=REGISTRY,
)
NODE_GATE_CHANGES = Counter(
    "fleet_agent_node_gate_changes",
    "Changes the node gate made to scheduler nodes (drain, resume, hold, release), by result "
    "(applied, failed, dry_run: printed, not made).",
    ["action", "result"],
    registry=REGISTRY,
)
NODE_GATE_LEFT_ALONE = Gauge(
    "fleet_agent_node_gate_left_alone",
    "Nodes the last gate sweep left as they are although their device's state asks for a change, by why "
    "(foreign_reason, foreign_reservation, not_in_slurm, not_a_node_name).",
    ["why"],
    registry=REGISTRY,
)

#: How jobs end in the agent: the three statuses it reports, and `abandoned` (the service took it back).
JOB_OUTCOMES = ("succeeded", "failed", "abandoned")
for _outcome in JOB_OUTCOMES:
    JOBS.labels(_outcome)


def serve(host: str, port: int, *, version: str, site: str, satellite: str) -> WSGIServer:
    """Start the metrics endpoint in a thread; returns the server (its `shutdown()` stops it)."""
    INFO.labels(version, site, satellite).set(1)
    server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    return server
