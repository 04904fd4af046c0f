"""Diagnostics: Sokal IAT on iid and AR(1) series, ESS, histograms, round trips."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.sampling.tempering import (
    autocorrelation,
    effective_sample_size,
    ess_per_second,
    integrated_autocorr_time,
    level_histogram,
    masked_mean,
    round_trips,
)


def ar1(rho: float, T: int, B: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal((T, B))
    x = np.empty((T, B))
    x[0] = eps[0] / np.sqrt(1 - rho**2)
    for t in range(1, T):
        x[t] = rho * x[t - 1] + eps[t]
    return x


def test_iat_of_iid_is_one():
    x = np.random.default_rng(0).standard_normal((20000, 4))
    assert integrated_autocorr_time(x) == pytest.approx(1.0, abs=0.1)
    assert effective_sample_size(x) == pytest.approx(x.size, rel=0.1)


@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_iat_of_ar1(rho):
    x = ar1(rho, 20000, 8, seed=1)
    assert integrated_autocorr_time(x) == pytest.approx((1 + rho) / (1 - rho), rel=0.1)
    r = autocorrelation(x)
    assert r[0] == 1.0 and r[1] == pytest.approx(rho, abs=0.02)


def test_constant_series_and_ess_per_second():
    assert integrated_autocorr_time(np.ones((100, 2))) == pytest.approx(1.0)
    x = np.random.default_rng(0).standard_normal(1000)
    assert ess_per_second(x, 2.0) == pytest.approx(effective_sample_size(x) / 2.0)
    with pytest.raises(ValueError, match="seconds"):
        ess_per_second(x, 0.0)
    with pytest.raises(ValueError, match="c must"):
        integrated_autocorr_time(x, c=0)
    with pytest.raises(ValueError, match="T >= 2"):
        integrated_autocorr_time(np.ones(1))


def test_masked_mean_standard_error():
    rng = np.random.default_rng(2)
    f = rng.standard_normal((4000, 5))
    mask = rng.random((4000, 5)) < 0.25
    mu, se = masked_mean(f, mask)
    assert mu == pytest.approx(f[mask].mean())
    assert se == pytest.approx(1 / np.sqrt(mask.sum()), rel=0.15)
    with pytest.raises(ValueError, match="selects nothing"):
        masked_mean(f, np.zeros_like(mask))


def test_level_histogram_and_round_trips():
    levels = np.array([[2, 1, 0, 1, 2, 1, 0, 0, 2], [0, 1, 2, 2, 1, 0, 1, 2, 2]]).T
    h = level_histogram(levels, 3)
    assert h.sum() == pytest.approx(1.0) and h[2] == pytest.approx(7 / 18)
    assert list(round_trips(levels, 3)) == [2, 1]
    with pytest.raises(ValueError, match="lie in"):
        level_histogram(levels, 2)
