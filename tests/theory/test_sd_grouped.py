"""Grouped splits of the empirical self-distillation experiment (rows grouped by document)."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.theory.self_distillation import EmpiricalSDConfig, grouped_split, probe_sd_experiment


def test_grouped_split_keeps_groups_together():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(40), 5)
    y = (groups % 2).astype(float)
    y_noisy = np.where(rng.random(len(y)) < 0.2, 1 - y, y)
    keep, held = grouped_split(y_noisy, groups, 0.3, seed=3)
    assert np.intersect1d(groups[keep], groups[held]).size == 0
    assert len(keep) + len(held) == len(y)
    assert 0.25 <= len(held) / len(y) <= 0.4
    _, h2 = grouped_split(y_noisy, groups, 0.3, seed=3)
    np.testing.assert_array_equal(held, h2)
    with pytest.raises(ValueError, match="one label only"):
        grouped_split(np.r_[np.zeros(5), np.ones(5)], np.r_[np.zeros(5), np.ones(5)], 0.3)
    with pytest.raises(ValueError, match="groups must have shape"):
        grouped_split(y, groups[:-1], 0.3)


def test_probe_sd_experiment_with_groups():
    """Tiny grouped mixture: test documents never share a group with training rows."""
    rng = np.random.default_rng(0)
    n_groups, per, N = 60, 6, 8
    groups = np.repeat(np.arange(n_groups), per)
    c = np.where(np.arange(n_groups) % 2 == 0, 1.0, -1.0)[groups]
    X = c[:, None] / np.sqrt(N) + 0.3 * rng.standard_normal((len(c), N))
    y = (1 + c) / 2
    config = EmpiricalSDConfig(n_stages=1, log10_lambdas=(-1.0, 1.0))
    err, res = probe_sd_experiment(X, y, 0.2, [0, 1], config, 0.3, groups=groups)
    assert err.shape == (2, 2) and np.all(err < 0.5)
    for seed, r in zip([0, 1], res, strict=True):
        rest, test = grouped_split(y, groups, 0.3, 10_000 + seed)
        g_rest = groups[rest]
        assert np.intersect1d(g_rest[r.train_index], g_rest[r.val_index]).size == 0
        assert np.intersect1d(g_rest, groups[test]).size == 0
    with pytest.raises(ValueError, match="seeds"):
        probe_sd_experiment(X, y, 0.2, [], config)
