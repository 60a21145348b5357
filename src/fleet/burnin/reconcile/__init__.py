"""Phase 2: keep the policy-progress projection equal to what the evidence says (the spec's
`policy-progress-reconcile`), one keyset page at a time, and clean up at the end of a sweep
without ever mass-deleting rows because an inventory feed hiccuped.

`load` resolves the scope and reads a page of targets with their evidence and stored rows; the
rules are `fleet_rules.verdicts`; `write` is the guarded upsert and the end-of-sweep cleanup;
`service` is the page (and `reconcile_sweep`, every page of a scope) with its signed cursor.

A page is a constant number of queries whatever its size: scope (3), the sweep's target count
(first page only), one query for the page's targets with their latest execution, its evaluation
and the stored row, one guarded bulk upsert, and two cleanup statements on the final page.
"""
