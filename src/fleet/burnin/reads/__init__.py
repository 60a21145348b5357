"""Reads for people: what each dashboard page shows, one module per page, each page's selector
returning one frozen dataclass (its read model) in a constant number of queries whatever the
fleet's size (tests hold them at two sizes).

| page | selector | module |
|---|---|---|
| `/` | `overview_page` | `overview` |
| `/sites/<slug>/` | `site_page` | `site` |
| `/sites/<slug>/grid/` | `grid_page` | `grid` |
| `/sites/<slug>/failures/` (and its CSV) | `failures_page`, `failures_export` | `failures` |
| `/sites/<slug>/devices/<hostname>/` | `device_page` | `device` |
| `/sites/<slug>/devices/<hostname>/certificate/` | `certificate_page` | `certificate` |
| `/executions/<uuid>/` | `execution_page` | `execution` |
| `/sites/<slug>/metrics/<requirement>/` | `metrics_page` | `metrics` |
| `/jobs/<uuid>/` | `job_detail_page` | `job` |
| `/sites/<slug>/reruns/<token>/` | `rerun_result_page` | `actions` |
| `/jobs/<uuid>/cancel/` | `job_cancel_page` | `actions` |
| `/sites/<slug>/isolation/<plan>/` | `isolation_plan_page` | `actions` |

What the grid's and the failures list's filters may name (classes, requirements, satellites, the
filtered class's racks, the class the grid opens on) lives in `filters`. What a device's acceptance
is lives in `acceptance` (`ACCEPTANCE`), read by the overview, the site page and the device page. A
selector raises `NotFoundError` for what it does not find.
"""
