"""The fleet-burnin satellite agent.

It runs on a site's satellite, behind the site firewall, and talks to the service only over HTTP:
it claims burn-in jobs, runs them on devices, reports executions, evaluates them and reconciles the
policy-progress projection. It must never import Django or the service package, so that a satellite
can install it alone.
"""

__version__ = "0.1.0"
