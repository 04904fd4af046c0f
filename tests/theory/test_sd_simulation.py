"""Replica theory vs finite-N simulation of the same self-distillation model."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.theory.self_distillation import (
    SelfDistillationModel,
    classification_error,
    sample_mixture,
    simulate,
    solve_multistage,
)

N_FEATURES = 800
SEEDS = range(24)

# (loss, alpha, theta, rho, learn_bias, lambdas, betas); bias fixed at large lambda (pitfall 2)
GRID = [
    ("mse", 2.0, 0.2, 0.5, False, (100.0,), ()),
    ("bce", 0.5, 0.1, 0.5, False, (1.0,), ()),
    ("mse", 1.0, 0.0, 0.3, True, (0.5,), ()),
    ("mse", 2.0, 0.2, 0.5, False, (1.0, 1.0), (2.0,)),
    ("mse", 3.0, 0.3, 0.3, False, (1.0, 1.0), (np.inf,)),
    ("bce", 2.0, 0.2, 0.5, False, (2.0, 2.0), (np.inf,)),
    ("bce", 1.0, 0.2, 0.5, False, (100.0, 100.0), (np.inf,)),
    ("bce", 1.0, 0.1, 0.3, True, (0.5, 0.5), (2.0,)),
    ("mse", 1.0, 0.2, 0.3, False, (1.0, 1.0, 1.0), (np.inf, np.inf)),
    ("bce", 1.0, 0.2, 0.3, False, (1.0, 1.0, 1.0), (2.0, np.inf)),
]


@pytest.mark.parametrize(
    ("loss", "alpha", "theta", "rho", "learn_bias", "lambdas", "betas"),
    GRID,
    ids=[f"{g[0]}-a{g[1]}-th{g[2]}-rho{g[3]}-{'b' if g[4] else 'nob'}-T{len(g[5])}" for g in GRID],
)
def test_theory_matches_simulation(loss, alpha, theta, rho, learn_bias, lambdas, betas):
    model = SelfDistillationModel(
        alpha=alpha, theta=theta, rho=rho, loss=loss, learn_bias=learn_bias
    )
    theory = solve_multistage(model, lambdas, betas).errors
    sim = simulate(model, lambdas, betas, n_features=N_FEATURES, seeds=SEEDS)
    z = (sim.mean - theory) / sim.sem
    assert np.all(np.abs(z) < 3), (theory, sim.mean, sim.sem, z)


def test_population_error_matches_fresh_samples():
    """The exact error of (m, Q, b) equals the empirical error on many fresh test points."""
    model = SelfDistillationModel(alpha=1.0, theta=0.2, rho=0.3, delta=0.7)
    rng = np.random.default_rng(1)
    n = 50
    w = rng.standard_normal(n) + 0.5
    B = 0.3
    big = SelfDistillationModel(alpha=4000.0, rho=0.3, delta=0.7)
    X, c, _ = sample_mixture(big, n, rng)
    empirical = np.mean(np.sign(X @ w / np.sqrt(n) + B) != c)
    exact = classification_error(w.mean(), w @ w / n, B, model)
    se = np.sqrt(exact * (1 - exact) / len(c))
    assert abs(empirical - exact) < 4 * se
