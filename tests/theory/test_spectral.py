"""Tests for sci_moe.theory.spectral: exact gaps, restricted gaps, decompositions, ST chains."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from sci_moe.theory.spectral import (
    ReversibleChain,
    bimodal_means,
    check_bound,
    dirichlet_form,
    exit_probability,
    gaussian_mixture_rwmh,
    geometric_ladder,
    lazy,
    projection_chain,
    restricted_spectral_gap,
    restriction_chain,
    simulated_tempering_chain,
    soft_projection_chain,
    soft_restriction_chain,
    spectral_gap,
    tv_distance,
)


def cycle_walk(n, sparse=False):
    """Lazy simple random walk on the n-cycle: eigenvalues 1/2 + cos(2 pi k / n) / 2."""
    shift = sp.diags([np.ones(n - 1), np.ones(1)], [1, -(n - 1)], shape=(n, n))
    P = 0.5 * sp.identity(n) + 0.25 * (shift + shift.T)
    return ReversibleChain(P.tocsr() if sparse else P.toarray(), np.ones(n))


@pytest.mark.parametrize("n", [3, 7, 40, 301])
@pytest.mark.parametrize("method", ["dense", "sparse"])
def test_cycle_gap_exact(n, method):
    chain = cycle_walk(n, sparse=method == "sparse")
    expected = 0.5 * (1 - np.cos(2 * np.pi / n))
    assert spectral_gap(chain, method=method) == pytest.approx(expected, rel=1e-10, abs=1e-14)


def test_cycle_absolute_gap():
    chain = ReversibleChain(cycle_walk(8).P * 2 - np.eye(8), np.ones(8))  # non-lazy walk
    # spectrum cos(2 pi k / 8) contains -1 (periodic): absolute gap 0, relative 1 - cos(pi/4)
    assert spectral_gap(chain) == pytest.approx(1 - np.cos(np.pi / 4), abs=1e-13)
    assert spectral_gap(chain, absolute=True) == pytest.approx(0.0, abs=1e-13)


@pytest.mark.parametrize(("p", "q"), [(0.1, 0.3), (0.5, 0.5), (0.9, 0.8), (1e-4, 2e-4)])
def test_two_state_gap(p, q):
    chain = ReversibleChain(np.array([[1 - p, p], [q, 1 - q]]), np.array([q, p]))
    assert spectral_gap(chain) == pytest.approx(p + q, rel=1e-12)


def test_gap_is_variational_minimum():
    chain, _, _ = gaussian_mixture_rwmh(bimodal_means(3.0), h=0.25)
    gap = spectral_gap(chain)
    rng = np.random.default_rng(0)
    for _ in range(20):
        f = rng.normal(size=chain.n)
        var = np.sum(chain.pi * (f - chain.pi @ f) ** 2)
        assert dirichlet_form(chain, f) / var >= gap - 1e-12


@pytest.mark.parametrize("D", [3.0, 7.0])
def test_sparse_dense_agree(D):
    st = simulated_tempering_chain(bimodal_means(D), h=0.2, weights=[0.2, 0.8])
    dense = spectral_gap(st.chain, method="dense")
    assert spectral_gap(st.chain, method="sparse") == pytest.approx(dense, rel=1e-8)
    rw, _, _ = gaussian_mixture_rwmh(bimodal_means(D), h=0.2)
    assert spectral_gap(rw, method="sparse") == pytest.approx(spectral_gap(rw), rel=1e-8)


def test_restricted_gap():
    D = 6.0
    st = simulated_tempering_chain(bimodal_means(D), h=0.25)
    chain = st.chain
    # Omega0 = Omega recovers the spectral gap
    small, _, _ = gaussian_mixture_rwmh(bimodal_means(3.0), h=0.25)
    full = restricted_spectral_gap(small, np.ones(small.n, dtype=bool))
    assert full == pytest.approx(spectral_gap(small), rel=1e-8)
    # an Omega0 = {|x| <= D/2 + 2} on every level (B.3 uses + 4 on a wider grid)
    x = st.points[:, 0][np.arange(chain.n) % st.points.shape[0]]
    omega0 = np.abs(x) <= D / 2 + 2
    rgap = restricted_spectral_gap(chain, omega0)
    assert rgap > 0
    # <= the restricted Rayleigh quotient of the mode indicator (a bottleneck test function)
    idx = np.flatnonzero(omega0)
    f = (x[idx] > 0).astype(float)
    P = chain.P[idx][:, idx].toarray()
    p = chain.pi[idx]
    num = 0.5 * np.sum(p[:, None] * P * (f[None, :] - f[:, None]) ** 2)
    den = 0.5 * np.sum(np.outer(p, p) * (f[None, :] - f[:, None]) ** 2)
    assert rgap <= num / den + 1e-12
    # a single mode's block at beta = 1 has a much larger restricted gap than the bimodal set
    rw, pts, _ = gaussian_mixture_rwmh(bimodal_means(D), h=0.25)
    one_mode = restricted_spectral_gap(rw, np.abs(pts[:, 0] - D / 2) <= 2)
    assert one_mode > 10 * restricted_spectral_gap(rw, np.abs(pts[:, 0]) <= D / 2 + 2)


def test_tv_decreases_for_lazy_chain():
    rw, _, _ = gaussian_mixture_rwmh(bimodal_means(4.0), h=0.25)
    chain = lazy(rw)
    start = 0
    tv = tv_distance(chain, start, 300)
    assert tv[0] == pytest.approx(1 - chain.pi[start])
    assert np.all(np.diff(tv) <= 1e-15)
    # spectral bound: ||P^t(x, .) - pi||_TV <= sqrt((1 - pi(x)) / pi(x)) / 2 * (1 - gap)^t
    gap = spectral_gap(chain)  # lazy: spectrum in [0, 1], so lambda_* = 1 - gap
    t = np.arange(tv.size)
    bound = 0.5 * np.sqrt((1 - chain.pi[start]) / chain.pi[start]) * (1 - gap) ** t
    assert np.all(tv <= bound + 1e-12)


def test_projection_and_restriction_chains():
    st = simulated_tempering_chain(bimodal_means(4.0), h=0.25, weights=[0.3, 0.7])
    proj = projection_chain(st.chain, st.labels)
    assert proj.n == st.soft_weights.shape[1]
    np.testing.assert_allclose(proj.pi, np.bincount(st.labels, weights=st.chain.pi), atol=1e-12)
    soft = soft_projection_chain(st.chain, st.soft_weights)
    np.testing.assert_allclose(soft.pi, st.chain.pi @ st.soft_weights, atol=1e-12)
    r = restriction_chain(st.chain, st.labels, 3)
    assert r.n == np.sum(st.labels == 3)
    s = soft_restriction_chain(st.chain, st.soft_weights, 3)
    assert 0 < spectral_gap(s) <= 2 and 0 < spectral_gap(r) <= 2


def test_matched_level_weights_give_target_level_marginal():
    betas = geometric_ladder(0.05, 4)
    st = simulated_tempering_chain(bimodal_means(5.0), betas=betas, h=0.25)
    np.testing.assert_allclose(st.level_marginal(), 0.25, atol=1e-12)
    r = np.array([0.1, 0.2, 0.3, 0.4])
    st = simulated_tempering_chain(bimodal_means(5.0), betas=betas, h=0.25, level_probs=r)
    np.testing.assert_allclose(st.level_marginal(), r, atol=1e-12)


CASES = [
    # (D, n_levels or None (B.3 default), beta_min or None, weights, level_weights, step, tempering)
    (D, L, bmin, w, lw, s, temp)
    for D, (L, bmin), w, lw, s, temp in itertools.product(
        [2.0, 5.0, 8.0],
        [(None, None), (3, 0.05)],
        [None, (0.2, 0.8)],
        ["matched", "equal"],
        [0.5, 1.5],
        ["power", "component"],
    )
]


@pytest.mark.parametrize(("D", "L", "bmin", "w", "lw", "step", "tempering"), CASES)
def test_bounds_hold_st(D, L, bmin, w, lw, step, tempering):
    betas = None if L is None else geometric_ladder(bmin, L)
    st = simulated_tempering_chain(
        bimodal_means(D), weights=w, betas=betas, h=0.25, step=step,
        level_weights=lw, tempering=tempering,
    )  # fmt: skip
    gap = spectral_gap(st.chain)
    for name in ("martin-randall", "jstv"):
        res = check_bound(st.chain, st.labels, name, exact_gap=gap)
        assert res.holds and res.bound > 0, res
    res = check_bound(st.chain, st.soft_weights, "soft", exact_gap=gap)
    assert res.holds and res.bound > 0, res


@pytest.mark.parametrize("step", [0.5, 2.0])
def test_bounds_hold_rwmh_and_2d(step):
    rw, _, labels = gaussian_mixture_rwmh(bimodal_means(4.0), weights=[0.2, 0.8], h=0.2, step=step)
    for name in ("martin-randall", "jstv", "soft"):
        assert check_bound(rw, labels, name).holds
    st = simulated_tempering_chain(
        bimodal_means(4.0, dim=2), betas=geometric_ladder(0.1, 3), h=0.5, step=step, pad=3.0
    )
    gap = spectral_gap(st.chain)
    assert spectral_gap(st.chain, method="sparse") == pytest.approx(gap, rel=1e-8)
    for name in ("martin-randall", "jstv"):
        assert check_bound(st.chain, st.labels, name, exact_gap=gap).holds
    assert check_bound(st.chain, st.soft_weights, "soft", exact_gap=gap).holds


def test_st_gap_polynomial_rwmh_exponential():
    Ds = [4.0, 8.0, 12.0]
    g_rw, g_st = [], []
    for D in Ds:
        rw, _, _ = gaussian_mixture_rwmh(bimodal_means(D), h=0.2)
        g_rw.append(spectral_gap(rw))
        g_st.append(spectral_gap(simulated_tempering_chain(bimodal_means(D), h=0.2).chain))
    g_rw, g_st = np.array(g_rw), np.array(g_st)
    ratio = g_st / g_rw
    assert np.all(np.diff(ratio) > 0) and ratio[-1] / ratio[0] > 1e4
    # RWMH: log-gap falls roughly like -D^2/8 (Arrhenius); ST: at most ~D^-2 over 4..12
    assert np.log(g_rw[0] / g_rw[-1]) > 10
    assert g_st[0] / g_st[-1] < (Ds[-1] / Ds[0]) ** 2


def test_exit_probability():
    rw, pts, _ = gaussian_mixture_rwmh(bimodal_means(6.0), h=0.25)
    start = int(np.argmin(np.abs(pts[:, 0] - 3.0)))
    assert np.all(exit_probability(rw, np.ones(rw.n, dtype=bool), start, 20) < 1e-12)
    leak = exit_probability(rw, pts[:, 0] > 0, start, 50)
    assert leak[0] == 0 and np.all(np.diff(leak) >= -1e-15) and 0 < leak[-1] < 1
    # leaving the right mode is slow: after 50 steps the leakage is below the TV distance to pi
    assert leak[-1] < 0.75 * tv_distance(rw, start, 50)[-1]


def test_bounds_hold_random_chains():
    """Random reversible chains (lazy or not, with bottlenecks) and random partitions."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(150):
        n, K = int(rng.integers(2, 10)), int(rng.integers(2, 4))
        labels = rng.integers(0, K, size=n)
        A = rng.exponential(size=(n, n)) * (rng.random((n, n)) < 0.7)
        A *= np.where(labels[:, None] == labels[None, :], 1.0, 10 ** rng.uniform(-4, 0))
        A = A + A.T
        np.fill_diagonal(A, rng.exponential(size=n) * (rng.random() < 0.5))
        if np.unique(labels).size < 2 or np.any(A.sum(1) == 0):
            continue
        chain = ReversibleChain(A / A.sum(1, keepdims=True), A.sum(1))
        gap = spectral_gap(chain)
        if gap < 1e-9:  # disconnected
            continue
        for name in ("martin-randall", "jstv", "soft"):
            assert check_bound(chain, labels, name, exact_gap=gap).holds
        W = rng.exponential(size=(n, K)) ** 3
        W /= W.sum(1, keepdims=True)
        assert check_bound(chain, W, "soft", exact_gap=gap).holds
        checked += 1
    assert checked > 50


def test_bad_inputs():
    with pytest.raises(ValueError, match="not stochastic"):
        ReversibleChain(np.array([[0.5, 0.4], [0.5, 0.5]]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="detailed balance"):
        ReversibleChain(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="negative"):
        ReversibleChain(np.array([[1.5, -0.5], [0.5, 0.5]]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="strictly positive"):
        ReversibleChain(np.eye(2), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="square"):
        ReversibleChain(np.ones((2, 3)) / 3, np.ones(2))
    with pytest.raises(ValueError, match="length"):
        ReversibleChain(np.eye(3), np.ones(2))
    chain = cycle_walk(5)
    with pytest.raises(ValueError, match="method"):
        spectral_gap(chain, method="eigs")
    with pytest.raises(ValueError, match="alpha"):
        lazy(chain, 1.0)
    with pytest.raises(ValueError, match="bound"):
        check_bound(chain, np.zeros(5, dtype=int), "paper")
    with pytest.raises(ValueError, match="hard partition"):
        check_bound(chain, np.full((5, 1), 1.0), "jstv")
    with pytest.raises(ValueError, match="sum to 1"):
        soft_projection_chain(chain, np.full((5, 2), 0.3))
    with pytest.raises(ValueError, match="at least two"):
        restricted_spectral_gap(chain, [0])
    with pytest.raises(ValueError, match="betas"):
        simulated_tempering_chain(bimodal_means(3.0), betas=[0.5, 0.9])
    with pytest.raises(ValueError, match="level_weights"):
        simulated_tempering_chain(bimodal_means(3.0), level_weights="park-pande")
