"""Fleet-relative outliers: the pure rule, by table and by property."""

from __future__ import annotations

from statistics import median
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet_rules.outliers import Sample, bad_side, find_outliers, mad, robust_z
from fleet_rules.vocabulary import Comparator, OutlierGroupReason


def group(values, comparator="gte", **kwargs):
    samples = [Sample(UUID(int=i + 1), f"n{i:02d}", float(v)) for i, v in enumerate(values)]
    return find_outliers(samples, comparator=comparator, **kwargs)


SIBLINGS = [400, 401, 399, 402, 398, 400, 401, 399, 400]


@pytest.mark.parametrize(
    ("values", "comparator", "kwargs", "named", "reason"),
    [
        # 20 % below a tight group, a floor rule: low is bad → named.
        (SIBLINGS + [320], "gte", {}, ["n09"], None),
        # The same device against a ceiling rule: low is good → nobody.
        (SIBLINGS + [320], "lte", {}, [], OutlierGroupReason.NONE_BEYOND_K),
        # 20 % above against a ceiling: named; against a floor: nobody.
        (SIBLINGS + [480], "lt", {}, ["n09"], None),
        (SIBLINGS + [480], "gt", {}, [], OutlierGroupReason.NONE_BEYOND_K),
        # eq has no worse side.
        (SIBLINGS + [320], "eq", {}, [], OutlierGroupReason.NO_BAD_SIDE),
        # Seven devices: fewer than the minimum group size (8).
        ([400, 401, 399, 402, 398, 400, 320], "gte", {}, [], OutlierGroupReason.TOO_FEW_DEVICES),
        # The same seven with the minimum lowered to 7: named.
        ([400, 401, 399, 402, 398, 400, 320], "gte", {"min_group": 7}, ["n06"], None),
        # More than half identical: MAD 0, no spread to compare with.
        ([400] * 6 + [399, 320], "gte", {}, [], OutlierGroupReason.MAD_ZERO),
        # A wider k tolerates the same distance (z here is about −53).
        (SIBLINGS + [320], "gte", {"k": 60}, [], OutlierGroupReason.NONE_BEYOND_K),
        # Two bad devices, farthest first.
        (SIBLINGS + [350, 300], "gte", {}, ["n10", "n09"], None),
    ],
)
def test_outliers_by_table(values, comparator, kwargs, named, reason):
    verdict = group(values, comparator, **kwargs)
    assert [o.hostname for o in verdict.outliers] == named
    assert verdict.reason == reason


def test_the_median_mad_and_z_score_are_the_textbook_ones():
    verdict = group(SIBLINGS + [320])
    assert verdict.median == 400.0
    assert verdict.mad == 1.0
    assert verdict.outliers[0].robust_z == pytest.approx(0.6745 * (320 - 400) / 1.0)


def test_the_comparator_decides_the_bad_side():
    assert [bad_side(c) for c in (Comparator.GT, Comparator.GTE, Comparator.LT, Comparator.LTE, Comparator.EQ)] == [
        -1,
        -1,
        1,
        1,
        0,
    ]


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        group(SIBLINGS, k=0)


values = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=0, max_size=40)


@given(values, st.sampled_from(["gt", "gte", "lt", "lte"]), st.floats(min_value=0.5, max_value=10))
def test_every_named_device_is_beyond_k_on_the_bad_side_and_every_other_is_not(xs, comparator, k):
    verdict = group(xs, comparator, k=k)
    named = {o.device_id for o in verdict.outliers}
    if len(xs) < 8:
        assert verdict.reason == OutlierGroupReason.TOO_FEW_DEVICES and not named
        return
    centre = median(xs)
    spread = mad(xs, centre)
    assert verdict.median == centre and verdict.mad == spread
    if spread == 0:
        assert verdict.reason == OutlierGroupReason.MAD_ZERO and not named
        return
    side = bad_side(comparator)
    for i, x in enumerate(xs):
        beyond = robust_z(x, centre, spread) * side > k
        assert (UUID(int=i + 1) in named) == beyond
    assert (verdict.reason is None) == bool(named)
    zs = [abs(o.robust_z) for o in verdict.outliers]
    assert zs == sorted(zs, reverse=True)


@given(values, st.floats(min_value=-1e3, max_value=1e3), st.floats(min_value=0.01, max_value=100))
def test_outliers_do_not_depend_on_units_or_offsets(xs, offset, scale):
    """Shifting and scaling every value (a change of units) names the same devices."""
    before = group(xs)
    after = group([x * scale + offset for x in xs])
    if before.mad and after.mad and before.mad > 1e-6:
        # Floating point at the k boundary aside, the set is the same.
        strong = {o.device_id for o in before.outliers if abs(o.robust_z) > 3.6}
        assert strong <= {o.device_id for o in after.outliers}


def test_a_non_finite_value_is_no_sample():
    samples = [Sample(uuid4(), f"n{i}", v) for i, v in enumerate([400.0] * 3 + [float("nan")] * 5)]
    assert find_outliers(samples, comparator="gte").reason == OutlierGroupReason.TOO_FEW_DEVICES
