"""``sci_moe.train.cycles``: training in cycles until the joined validation curve is flat
(:func:`until_flat`, :func:`concat`), used by the benchmarks through ``benchmarks/_common``."""

from __future__ import annotations

import pytest

from sci_moe.train import cycles


@pytest.fixture
def common():
    """The module under test (the name the tests were written against)."""
    return cycles


def last_value_judge(curve):
    """Flat when the joined curve's last value is 1.0 (a stand-in for a flatness rule)."""
    return curve[-1][1] == 1.0


def fake(curves):
    """A fake training whose cycle ``c`` returns ``curves[c]``; records ``(c, seed)``."""
    calls = []

    def cycle(c, seed):
        calls.append((c, seed))
        return curves[c]

    return cycle, calls


def test_stops_at_the_first_flat_cycle(common):
    curves = [[[0, 0.0], [5, 0.5]], [[0, 0.5], [5, 0.9]], [[0, 0.9], [5, 1.0]]]
    cycle, calls = fake([*curves, [[0, 1.0], [5, 1.0]]])
    curve, n, conv = common.until_flat(cycle, last_value_judge, max_cycles=4, seed=7)
    assert calls == [(0, 7), (1, 107), (2, 207)]  # flat at cycle 2: no cycle 3
    assert (n, conv) == (3, True) and common.CYCLE_SEED == 100
    assert curve == [[0, 0.0], [5, 0.5], [10, 0.9], [15, 1.0]]


def test_a_never_flat_run_stops_at_max_cycles(common):
    cycle, calls = fake([[[0, 0.0], [4, 0.1]]] * 5)
    curve, n, conv = common.until_flat(cycle, last_value_judge, max_cycles=3, cycle_steps=4)
    assert calls == [(0, 0), (1, 100), (2, 200)] and (n, conv) == (3, False)
    assert [s for s, _ in curve] == [0, 4, 8, 12]
    with pytest.raises(ValueError, match="max_cycles"):
        common.until_flat(cycle, last_value_judge, max_cycles=0)


def test_min_cycles_judges_only_from_that_cycle_on(common):
    """A first cycle that ends flat (its annealed tail) does not end the run."""
    flat_first = [[[0, 0.0], [5, 1.0]], [[0, 1.0], [5, 1.0]], [[0, 1.0], [5, 1.0]]]
    cycle, calls = fake(flat_first)
    _, n, conv = common.until_flat(cycle, last_value_judge, max_cycles=3)
    assert (n, conv, len(calls)) == (1, True, 1)
    cycle, calls = fake(flat_first)
    curve, n, conv = common.until_flat(cycle, last_value_judge, max_cycles=3, min_cycles=2)
    assert (n, conv) == (2, True) and calls == [(0, 0), (1, 100)]
    assert curve == [[0, 0.0], [5, 1.0], [10, 1.0]]
    for bad in (0, 4):
        with pytest.raises(ValueError, match="min_cycles"):
            common.until_flat(cycle, last_value_judge, max_cycles=3, min_cycles=bad)


def test_concat_shifts_by_cycle_steps_or_by_each_cycles_end(common):
    curves = [[[0, 5.0], [3, 4.0], [7, 3.5]], [[0, 3.5], [4, 3.2], [6, 3.1]], [[2, 3.0]]]
    by_end = common.concat(curves)
    assert by_end == [[0, 5.0], [3, 4.0], [7, 3.5], [11, 3.2], [13, 3.1], [15, 3.0]]
    fixed = common.concat(curves, cycle_steps=10)
    assert fixed == [[0, 5.0], [3, 4.0], [7, 3.5], [14, 3.2], [16, 3.1], [22, 3.0]]
    assert common.concat([]) == [] and isinstance(by_end[-1][0], int)


def test_split_cycles_inverts_concat():
    from sci_moe.train.cycles import concat, split_cycles

    curves = [[[0, 5.0], [4, 3.0], [8, 2.0]], [[0, 2.0], [4, 2.5], [8, 1.5]], [[0, 1.5], [8, 1.4]]]
    joined = concat(curves, 8)
    assert split_cycles(joined, 8) == curves
    assert concat(split_cycles(joined, 8), 8) == joined
    with pytest.raises(ValueError, match="end of a cycle of 8 steps"):
        split_cycles(joined[:4], 8)  # ends at step 12, inside cycle 1
    with pytest.raises(ValueError, match="cycle_steps must be >= 1"):
        split_cycles(joined, 0)


def test_until_flat_continues_done_cycles():
    """A run stopped at a smaller cap continues at cycle len(done); a done run that is
    already flat is not trained again; more cycles done than the cap is refused."""
    from sci_moe.train.cycles import concat, until_flat

    ends = [3.0, 2.0, 1.5, 1.2, 1.199]

    def cycle(c, seed):
        calls.append((c, seed))
        start = 5.0 if c == 0 else ends[c - 1]
        return [[0, start], [10, ends[c]]]

    def flat(curve):
        return curve[-1][1] > 0.99 * curve[-2][1]

    calls: list = []
    first, n, conv = until_flat(cycle, flat, max_cycles=2, seed=7)
    assert (n, conv) == (2, False) and calls == [(0, 7), (1, 107)]
    done = [[[0, 5.0], [10, 3.0]], [[0, 3.0], [10, 2.0]]]
    assert concat(done, 10) == first
    calls.clear()
    curve, n, conv = until_flat(cycle, flat, max_cycles=6, seed=7, cycle_steps=10, done=done)
    assert calls == [(2, 207), (3, 307), (4, 407)] and (n, conv) == (5, True)
    assert curve[:3] == first and curve[-1] == [50, 1.199]
    calls.clear()
    assert until_flat(cycle, flat, 9, seed=7, cycle_steps=10, done=[[[0, 1.0], [10, 0.999]]]) == (
        [[0, 1.0], [10, 0.999]],
        1,
        True,
    )
    assert calls == []
    with pytest.raises(ValueError, match="more than max_cycles=1"):
        until_flat(cycle, flat, 1, done=done)
