"""Phase 2: keep the policy-progress projection equal to what the evidence says (the spec's
`policy-progress-reconcile`), one keyset page at a time, and clean up at the end of a sweep
without ever mass-deleting rows because an inventory feed hiccuped.

`load` resolves the scope and reads a page of targets with their evidence and stored rows; the
rules are `fleet_rules.verdicts`; `write` is the guarded upsert and the end-of-sweep cleanup;
`service` is the page (and `reconcile_sweep`, every page of a scope) with its signed cursor.

A page is a constant number of queries whatever its size (held at limits 50 and 500 by the tests
and the bench): the scope (3: satellite, requirements with their policy, resolutions), the sweep's
target count (first page only), one statement for the page's targets with their latest execution,
its evaluation, the stored row and the orphans in its range (`load.PAGE`), one guarded bulk upsert
(none when the page changes nothing), then certificate issuance for the devices it touched (four
statements: lock, facts, supersede, issue; none when it touched nothing), and the cleanup (two
statements) and sweep record on the final page. Each statement is a named
`fleet.core.statements.Statement` beside the code that runs it.
"""
