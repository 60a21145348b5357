"""Acceptance certificates: signing keys, issuance and supersession within reconcile, reads,
verification and the acceptance gate. The rules are `fleet_rules.certificates`."""
