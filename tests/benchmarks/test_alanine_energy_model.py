"""``benchmarks/alanine_energy_model/run.py``: the demo protocol's burn-in matches
``md analyse``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("alanine_energy_model/run.py", "alanine_bench") as mod:
        yield mod


def test_drop_burn_in_keeps_each_walkers_frames_from_the_burn_in_time(bench):
    # 2 walkers x 10 frames, walker-major; frame k = 1..10 at k * 0.2 ps
    ang = np.arange(20.0).reshape(20, 1)
    kept = bench.drop_burn_in(ang, 2, 0.2, 0.6).ravel()
    # frames at 0.6 ps and later: k = 3..10 of each walker
    assert kept.tolist() == [*range(2, 10), *range(12, 20)]
    assert bench.drop_burn_in(ang, 2, 0.2, 0.0).ravel().tolist() == list(range(20))


def test_drop_burn_in_follows_the_analyse_rule(bench):
    """The same frames as ``analyse_run``'s skip for the demo's 10 ps at 0.2 ps per frame."""
    per, burn, frame = 500, 10.0, 0.2
    skip = min(per, max(0, math.ceil(burn / frame - 1e-9) - 1))
    ang = np.zeros((3 * per, 2))
    assert len(bench.drop_burn_in(ang, 3, frame, burn)) == 3 * (per - skip) == 3 * 451


def test_drop_burn_in_rejects_bad_input(bench):
    ang = np.zeros((20, 2))
    with pytest.raises(ValueError, match=">= 0"):
        bench.drop_burn_in(ang, 2, 0.2, -1.0)
    with pytest.raises(ValueError, match="split"):
        bench.drop_burn_in(ang, 3, 0.2, 1.0)
    with pytest.raises(ValueError, match="no frames left"):
        bench.drop_burn_in(ang, 2, 0.2, 5.0)
