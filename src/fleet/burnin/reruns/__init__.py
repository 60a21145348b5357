"""Rerun planning and dispatch (the spec's `rerun-plans-dispatch`, and its preview).

`selection` says which devices a person's selection means (every failing device, a topology's
members, named devices: the dashboard and `fleet rerun` share it; the API names device ids).
`load` reads everything planning needs into `fleet_rules.planning`'s dataclasses; the rule is
`fleet_rules.planning.plan`; `service` writes its jobs through the standard Job path
(`fleet.jobs.services.jobs_create`). Dispatch runs in one transaction that first locks the
selected devices and every member of their cohorts in primary-key order, then reads under those
locks, so two concurrent dispatches over overlapping devices serialise and never create two
active jobs for one device. The number of queries does not depend on how many devices are
selected.
"""
