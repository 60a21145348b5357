"""Threshold resolution (`fleet_rules.resolution`): the key is a function of what judges, nothing
else. No database. (Moved from tests/policies/test_resolution.py, which keeps the loader's test.)"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from fleet_rules.canonical import canonical_json
from fleet_rules.resolution import Rule, resolve

SITE = UUID("11111111-1111-1111-1111-111111111111")
OTHER = UUID("22222222-2222-2222-2222-222222222222")

metrics = st.sampled_from(["busbw_gbps", "h2d_gbps", "diag_failed_tests", "bw_gbps", "temp_c"])
statistics = st.sampled_from([None, "min", "max", "mean", "p99"])
comparators = st.sampled_from(["gt", "lt", "eq", "gte", "lte"])
numbers = st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@st.composite
def rule_sets(draw):
    """Distinct (metric, statistic) default rules, plus overrides for SITE and OTHER."""
    slots = draw(st.lists(st.tuples(metrics, statistics), min_size=1, max_size=6, unique=True))
    rules = [Rule(m, s, draw(comparators), draw(numbers), None) for m, s in slots]
    for site in (SITE, OTHER):
        for m, s in draw(st.lists(st.sampled_from(slots), max_size=3, unique=True)):
            rules.append(Rule(m, s, draw(comparators), draw(numbers), site))
    return rules


@given(rule_sets(), st.randoms())
def test_key_does_not_depend_on_rule_order(rules, random):
    shuffled = list(rules)
    random.shuffle(shuffled)
    assert resolve(shuffled, SITE).key == resolve(rules, SITE).key


@given(rule_sets())
def test_key_does_not_depend_on_dict_key_order(rules):
    resolution = resolve(rules, SITE)
    reordered = [dict(reversed(list(rule.items()))) for rule in resolution.rules]
    from fleet_rules.resolution import source_key

    assert source_key(canonical_json(reordered)) == resolution.key


def _applicable(rules, site):
    """Index of the rule that decides each slot for `site` (override wins)."""
    chosen = {}
    for index, rule in enumerate(rules):
        slot = (rule.metric, rule.statistic)
        if rule.site_id is None and slot not in chosen:
            chosen[slot] = index
    for index, rule in enumerate(rules):
        if rule.site_id == site:
            chosen[(rule.metric, rule.statistic)] = index
    return set(chosen.values())


@given(rule_sets(), st.data())
def test_key_changes_when_an_applicable_comparator_or_threshold_changes(rules, data):
    index = data.draw(st.sampled_from(sorted(_applicable(rules, SITE))))
    rule = rules[index]
    if data.draw(st.booleans()):
        new = Rule(
            rule.metric,
            rule.statistic,
            data.draw(comparators.filter(lambda c: c != rule.comparator)),
            rule.threshold,
            rule.site_id,
        )
    else:
        new = Rule(
            rule.metric,
            rule.statistic,
            rule.comparator,
            data.draw(numbers.filter(lambda n: n != rule.threshold)),
            rule.site_id,
        )
    changed = rules[:index] + [new] + rules[index + 1 :]
    assert resolve(changed, SITE).key != resolve(rules, SITE).key


@given(rule_sets(), st.data())
def test_key_changes_when_an_applicable_statistic_changes(rules, data):
    index = data.draw(st.sampled_from(sorted(_applicable(rules, SITE))))
    rule = rules[index]
    taken = {(r.metric, r.statistic) for r in rules}
    free = [s for s in [None, "min", "max", "mean", "p99", "p50"] if (rule.metric, s) not in taken]
    if not free:
        return
    moved = [
        Rule(r.metric, data.draw(st.sampled_from(free)), r.comparator, r.threshold, r.site_id)
        if (r.metric, r.statistic) == (rule.metric, rule.statistic)
        else r
        for r in rules
    ]
    assert resolve(moved, SITE).key != resolve(rules, SITE).key


@given(rule_sets(), comparators, numbers)
def test_adding_or_changing_an_override_for_this_site_changes_the_key(rules, comparator, threshold):
    default = next(r for r in rules if r.site_id is None)
    current = {(r.metric, r.statistic): r for r in rules if r.site_id is None}
    current.update({(r.metric, r.statistic): r for r in rules if r.site_id == SITE})
    decided = current[(default.metric, default.statistic)]
    if (comparator, threshold) == (decided.comparator, decided.threshold):
        return
    without = [
        r for r in rules if not (r.site_id == SITE and (r.metric, r.statistic) == (default.metric, default.statistic))
    ]
    overridden = without + [Rule(default.metric, default.statistic, comparator, threshold, SITE)]
    assert resolve(overridden, SITE).key != resolve(rules, SITE).key


@given(rule_sets(), comparators, numbers)
def test_an_override_for_another_site_does_not_change_the_key(rules, comparator, threshold):
    default = next(r for r in rules if r.site_id is None)
    others = [
        r for r in rules if not (r.site_id == OTHER and (r.metric, r.statistic) == (default.metric, default.statistic))
    ]
    with_other = others + [Rule(default.metric, default.statistic, comparator, threshold, OTHER)]
    assert resolve(with_other, SITE).key == resolve(rules, SITE).key


def test_integral_floats_and_ints_give_the_same_key():
    assert (
        resolve([Rule("m", None, "gte", 431, None)], None).key
        == resolve([Rule("m", None, "gte", 431.0, None)], None).key
    )


def _example_blocks() -> dict[str, str]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "threshold-resolution.md").read_text()
    blocks = re.findall(r"<!-- example:(\w+) -->\n```\w*\n(.*?)\n```", text, flags=re.S)
    return dict(blocks)


def test_documented_worked_example_is_what_the_code_computes():
    blocks = _example_blocks()
    rules = [
        Rule(r["metric"], r["statistic"], r["comparator"], r["threshold"], UUID(r["site"]) if r["site"] else None)
        for r in json.loads(blocks["rules"])
    ]
    resolution = resolve(rules, UUID(blocks["site"].strip()))
    assert resolution.canonical.decode() == blocks["canonical"]
    assert resolution.key == blocks["key"].strip()
    assert hashlib.sha256(blocks["canonical"].encode()).hexdigest() == blocks["key"].strip()
