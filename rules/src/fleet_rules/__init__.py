"""fleet-burnin's rules core: the domain's decisions as pure functions over small dataclasses.

Imports no Django and touches no database (import-linter holds it), so every rule is tested by
table. The service loads facts into these dataclasses, calls a rule, and writes what it decides;
see docs/architecture.md for which module holds which rule.
"""
