"""The flatness criterion of the benchmarks (sci_moe.train.is_flat)."""

import math

import pytest

from sci_moe.train import is_flat, tail_gain


def test_flat_and_improving_curves():
    steps = list(range(10, 110, 10))
    decaying = [math.exp(-s / 10) + 1.0 for s in steps]  # flattens to 1
    assert is_flat(steps, decaying)
    linear = [100.0 - s for s in steps]
    assert not is_flat(steps, linear)
    # 2 % better in the tail: not flat at 1 %, flat at 5 %
    step = [1.0] * 8 + [0.98, 0.98]
    assert not is_flat(steps, step)
    assert is_flat(steps, step, tol=0.05)


def test_max_mode_short_and_bad_curves():
    steps = [1, 2, 3, 4, 5]
    assert is_flat(steps, [0.1, 0.5, 0.8, 0.801, 0.8], mode="max")
    assert not is_flat(steps, [0.1, 0.2, 0.3, 0.4, 0.9], mode="max")
    assert not is_flat(steps[:3], [1.0, 1.0, 1.0])  # too few evaluations
    assert not is_flat(steps, [1.0, 1.0, float("nan"), 1.0, 1.0])
    assert is_flat([1, 2, 3, 4, 5], [0.0] * 5)  # zero loss stays flat
    with pytest.raises(ValueError, match="tail"):
        is_flat(steps, [1.0] * 5, tail=1.0)
    with pytest.raises(ValueError, match="mode"):
        is_flat(steps, [1.0] * 5, mode="best")
    with pytest.raises(ValueError, match="values"):
        is_flat(steps, [1.0] * 4)


def test_atol_is_the_metric_resolution():
    steps = list(range(10, 110, 10))
    # a top-1 accuracy over 150 items: one item better in the tail is 0.0067, 2 % relative
    one_more = [0.1, 0.2, 0.3] + [1 / 3] * 5 + [1 / 3 + 1 / 150] * 2
    assert not is_flat(steps, one_more, mode="max")
    assert is_flat(steps, one_more, mode="max", atol=0.01)
    two_more = one_more[:8] + [1 / 3 + 2 / 150] * 2
    assert not is_flat(steps, two_more, mode="max", atol=0.01)
    # the default atol = 0 leaves the relative rule as it was
    assert is_flat(steps, one_more, mode="max", tol=0.05, atol=0.0)
    with pytest.raises(ValueError, match="atol"):
        is_flat(steps, one_more, atol=-0.1)


def test_tail_gain_is_the_quantity_is_flat_compares():
    steps = list(range(10, 110, 10))
    step = [1.0] * 8 + [0.98, 0.98]
    assert tail_gain(steps, step) == pytest.approx(0.02)
    # flat exactly when the gain is below tol, either side of it
    for tol in (0.019, 0.021):
        assert is_flat(steps, step, tol=tol) == (tail_gain(steps, step) < tol)
    assert tail_gain(steps, [0.5] * 8 + [0.6, 0.6]) == pytest.approx(-0.2)  # a worse tail
    accuracy = [0.5] * 8 + [0.55, 0.55]
    assert tail_gain(steps, accuracy, mode="max") == pytest.approx(0.1)
    assert math.isnan(tail_gain(steps[:3], [1.0] * 3))  # too few to judge
    assert math.isnan(tail_gain(steps, [0.0] * 10))  # no scale to be relative to
    with pytest.raises(ValueError, match="mode"):
        tail_gain(steps, step, mode="best")
