"""Simulated tempering and parallel tempering on a bimodal 1-D Gaussian mixture.

Target p(x) = 0.3 N(-5, 1) + 0.7 N(5, 1) (separation 10 sigma). Exact log Z_l of the
power-tempered targets p^beta come from quadrature on a fine grid.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sci_moe.sampling.tempering import (
    MALA,
    RWMH,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    geometric_ladder,
    level_histogram,
    masked_mean,
    park_pande_weights,
    round_trips,
    sample,
)

W = torch.tensor([0.3, 0.7], dtype=torch.float64)
MU = torch.tensor([-5.0, 5.0], dtype=torch.float64)
BETAS = geometric_ladder(0.01, 6, dtype=torch.float64)
L = 6


def mixture_lp(x):
    w, mu = W.to(x.dtype), MU.to(x.dtype)
    return torch.logsumexp(w.log() - 0.5 * (x - mu) ** 2 - 0.5 * math.log(2 * math.pi), dim=1)


def exact_log_z(betas):
    grid = np.linspace(-80, 80, 160001)
    lp = mixture_lp(torch.tensor(grid)[:, None]).numpy()
    lz = np.array([np.log(np.trapezoid(np.exp(b * lp), grid)) for b in betas.numpy()])
    return lz - lz[-1]


LOG_Z = exact_log_z(BETAS)
X0 = torch.full((32, 1), -5.0, dtype=torch.float64)  # every chain starts in the 0.3 mode


def right_mode_weight(res, burn=500):
    top = res.levels[burn:] == L - 1
    return masked_mean((res.x[burn:, :, 0] > 0).double(), top)


@pytest.mark.parametrize("kernel", [RWMH(1.5), MALA(1.0)], ids=["rwmh", "mala"])
def test_st_reproduces_mode_weights_where_rwmh_is_stuck(kernel):
    cfg = TemperingConfig(BETAS, kernel, n_local_steps=2, log_weights=torch.tensor(-LOG_Z))
    res = SimulatedTempering(mixture_lp, cfg).run(X0, 3000, seed=1)
    w, se = right_mode_weight(res)
    assert abs(w - 0.7) < 3 * se and se < 0.03
    hist = level_histogram(res.levels, L)
    assert np.all(np.abs(hist - 1 / L) < 0.03)  # exact weights -> flat levels
    assert round_trips(res.levels, L).sum() > 100
    assert float(res.level_acceptance.min()) > 0.5
    # plain RWMH from the same start barely leaves the 0.3 mode
    s, _ = sample(RWMH(1.5), mixture_lp, X0, 1000, seed=1)
    stuck = float((s[..., 0] > 0).double().mean())
    assert stuck < 0.1 and abs(stuck - 0.7) > 30 * se


def test_pt_reproduces_mode_weights():
    cfg = TemperingConfig(BETAS, RWMH(1.5), n_local_steps=2, weights="sams")
    res = ParallelTempering(mixture_lp, cfg).run(X0[:8], 3000, seed=1)
    f = (res.x[500:, L - 1 :: L, 0] > 0).double()
    w, se = masked_mean(f, torch.ones_like(f, dtype=torch.bool))
    assert abs(w - 0.7) < 3 * se and se < 0.03
    assert res.x.shape == (3000, 8 * L, 1)
    assert round_trips(res.levels, L).sum() > 100


@pytest.mark.parametrize("mode", ["sams", "wang-landau"])
def test_adapted_weights_approach_log_partition_differences(mode):
    cfg = TemperingConfig(BETAS, RWMH(1.5), n_local_steps=2, weights=mode)
    res = SimulatedTempering(mixture_lp, cfg).run(X0, 3000, seed=2)
    err = np.abs(res.log_z_estimate().numpy() - LOG_Z)
    assert err.max() < 0.1, err
    w, se = right_mode_weight(res, burn=1000)
    assert abs(w - 0.7) < 3 * se


def test_park_pande_weights():
    # d-dim standard Gaussian: log Z_beta = -(d/2) log beta + c, <log p>_beta = -d/(2 beta)
    d, betas = 3, geometric_ladder(0.01, 400, dtype=torch.float64)
    g = park_pande_weights(betas, -d / (2 * betas))
    assert np.allclose(-g.numpy(), -(d / 2) * np.log(betas.numpy()), atol=1e-3)
    # estimated from pilot runs on the mixture: rough, but good enough to move across levels
    cfg = TemperingConfig(BETAS, RWMH(1.5), n_local_steps=2, weights="park-pande")
    res = SimulatedTempering(mixture_lp, cfg).run(X0, 1500, seed=3)
    assert np.abs(res.log_z_estimate().numpy() - LOG_Z).max() < 0.6
    assert level_histogram(res.levels, L).min() > 0.5 / L
    with pytest.raises(ValueError, match="same shape"):
        park_pande_weights(betas, betas[:-1])


def test_default_weight_mode_and_float32(float_dtype):
    betas = geometric_ladder(0.01, L)
    assert TemperingConfig(betas).weights == "sams"
    cfg = TemperingConfig(betas, RWMH(1.5), n_local_steps=2, log_weights=torch.tensor(-LOG_Z))
    assert cfg.weights == "given"
    res = SimulatedTempering(mixture_lp, cfg).run(X0.to(float_dtype), 1000, seed=0, progress=False)
    assert res.x.dtype == float_dtype and res.log_weights.dtype == float_dtype
    w, se = right_mode_weight(res, burn=200)
    assert abs(w - 0.7) < 4 * se


def test_seeded_runs_are_reproducible():
    cfg = TemperingConfig(BETAS, RWMH(1.5), weights="sams")
    a = SimulatedTempering(mixture_lp, cfg).run(X0, 100, seed=5)
    b = SimulatedTempering(mixture_lp, cfg).run(X0, 100, seed=5)
    c = SimulatedTempering(mixture_lp, cfg).run(X0, 100, seed=6)
    assert torch.equal(a.x, b.x) and torch.equal(a.levels, b.levels)
    assert torch.equal(a.log_weights, b.log_weights)
    assert not torch.equal(a.x, c.x)
    p1 = ParallelTempering(mixture_lp, cfg).run(X0[:2], 50, seed=5, thin=5)
    p2 = ParallelTempering(mixture_lp, cfg).run(X0[:2], 50, seed=5, thin=5)
    assert torch.equal(p1.x, p2.x) and p1.x.shape[0] == 10


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"betas": torch.tensor([0.5, 0.1, 1.0])}, "increasing"),
        ({"betas": torch.tensor([0.1, 0.5])}, "must be 1"),
        ({"betas": torch.tensor([1.0])}, "at least 2"),
        ({"weights": "given"}, "needs log_weights"),
        ({"weights": None, "log_weights": torch.zeros(2)}, "shape"),
        ({"weights": "magic"}, "one of"),
        ({"weights": "sams", "n_local_steps": 0}, "n_local_steps"),
        ({"weights": "sams", "log_weights": torch.zeros(3)}, "shape"),
        ({"weights": "sams", "gain_exponent": 0.3}, "gain_exponent"),
        ({"weights": "sams", "flatness": 1.5}, "flatness"),
        ({"weights": "sams", "gain0": 0.0}, "gain0"),
    ],
)
def test_bad_configs_raise(kwargs, match):
    kw = {"betas": BETAS, **kwargs}
    with pytest.raises(ValueError, match=match):
        TemperingConfig(**kw)


def test_bad_run_arguments_raise():
    st = SimulatedTempering(mixture_lp, TemperingConfig(BETAS, weights="sams"))
    with pytest.raises(ValueError, match="x0"):
        st.run(torch.zeros(4), 10)
    with pytest.raises(ValueError, match="n_iterations"):
        st.run(X0, 0)
    with pytest.raises(ValueError, match="levels0"):
        st.run(X0, 10, levels0=torch.full((32,), 9))
    with pytest.raises(ValueError, match="thin"):
        ParallelTempering(mixture_lp, st.config).run(X0, 10, thin=0)
    with pytest.raises(TypeError, match="callable"):
        SimulatedTempering(None, st.config)
