"""Phase 1: materialise the agents' evaluations (the spec's `evaluation-results-upsert`).

`load` reads the executions, their stored results and the current resolutions; the rule is
`fleet_rules.evaluations.classify`; `write` is one guarded bulk upsert; `service` runs the three
in one transaction. The query count does not depend on the number of items.
"""
