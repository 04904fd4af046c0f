"""Tests for sci_moe.theory.spectral.st_bound: the restricted-gap decomposition for ST."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.theory.spectral import (
    ReversibleChain,
    bimodal_means,
    restricted_spectral_gap,
    restriction_chain,
    simulated_tempering_chain,
    spectral_gap,
    st_decomposition,
    st_gap_bound,
    tempering_decomposition,
)


@pytest.mark.parametrize("kernel", ["metropolis", "restriction"])
@pytest.mark.parametrize("tempering", ["component", "power"])
@pytest.mark.parametrize(("D", "w"), [(3.0, None), (5.0, [0.25, 0.75])])
def test_bound_below_exact_gaps_on_grid_st(kernel, tempering, D, w):
    st = simulated_tempering_chain(bimodal_means(D), h=0.5, weights=w, tempering=tempering)
    dec = tempering_decomposition(st, component_kernel=kernel)
    gap = spectral_gap(st.chain)
    assert 0 < dec.bound <= gap
    assert dec.omega_mass == 1.0 and dec.bound == dec.gap_bound
    assert dec.component_gaps.size == 2 * st.betas.size
    np.testing.assert_allclose(dec.component_mass.sum(), 1.0, atol=1e-12)
    # restricted to a box around the modes
    x = st.points[np.arange(st.chain.n) % st.points.shape[0], 0]
    omega0 = np.abs(x) <= D / 2 + 2
    rdec = tempering_decomposition(st, omega0, kernel)
    rgap = restricted_spectral_gap(st.chain, omega0)
    assert 0 < rdec.bound <= rgap
    assert rdec.omega_mass == pytest.approx(st.chain.pi[omega0].sum())
    # identity used by the proof and the benchmark: Gap_Omega0(P) = Gap(P^0) / pi(Omega0)
    p0 = restriction_chain(st.chain, omega0.astype(int), 1)
    assert spectral_gap(p0) / rdec.omega_mass == pytest.approx(rgap, rel=1e-8)


def _random_st(rng, L=3, G=5, K=2):
    """A random ST chain with an arbitrary (non-Metropolis-RW) local kernel."""
    comp = rng.random((L, K, G)) + 0.05  # p_ij(x), normalised below
    comp /= comp.sum(axis=2, keepdims=True)
    w = rng.random((L, K)) + 0.1
    w /= w.sum(axis=1, keepdims=True)
    r = rng.random(L) + 0.2
    r /= r.sum()
    p = np.einsum("lk,lkg->lg", w, comp)  # p_i(x)
    pi = (r[:, None] * p).ravel()
    n = L * G
    P = np.zeros((n, n))
    for i in range(L):
        S = rng.random((G, G)) * (rng.random((G, G)) < 0.6) + np.eye(G, k=1)  # connected
        S = np.triu(S, 1) + np.triu(S, 1).T  # symmetric random flow = arbitrary kernel
        S *= 0.45 / (S.sum(axis=1) / p[i]).max()
        blk = S / p[i][:, None]
        P[i * G : (i + 1) * G, i * G : (i + 1) * G] = blk
        for j in (i - 1, i + 1):
            if 0 <= j < L:
                a = 0.25 * np.minimum(1.0, r[j] * p[j] / (r[i] * p[i]))
                P[i * G + np.arange(G), j * G + np.arange(G)] = a
    P[np.diag_indices(n)] = 1.0 - P.sum(axis=1)
    resp = (w[:, :, None] * comp / p[:, None, :]).transpose(0, 2, 1).reshape(n, K)
    level, site = np.repeat(np.arange(L), G), np.tile(np.arange(G), L)
    return ReversibleChain(P, pi), level, site, resp


@pytest.mark.parametrize("kernel", ["metropolis", "restriction"])
@pytest.mark.parametrize("seed", range(4))
def test_bound_holds_for_arbitrary_local_kernel(seed, kernel):
    rng = np.random.default_rng(seed)
    chain, level, site, resp = _random_st(rng)
    dec = st_decomposition(chain, level, site, resp, component_kernel=kernel)
    assert 0 < dec.bound <= spectral_gap(chain) * (1 + 1e-10)
    omega0 = rng.random(chain.n) < 0.7
    omega0[:2] = True
    rdec = st_decomposition(chain, level, site, resp, omega0, kernel)
    assert rdec.bound <= restricted_spectral_gap(chain, omega0) * (1 + 1e-10) + 1e-14


def test_metropolis_components_beat_restriction_at_the_target_level():
    # the restriction inherits the other mode's well as a trap; the re-targeted proposal not
    st = simulated_tempering_chain(bimodal_means(8.0), h=1.0, pad=2.5)
    met = tempering_decomposition(st)
    res = tempering_decomposition(st, component_kernel="restriction")
    top = met.component_level == st.betas.size - 1
    assert met.component_gaps[top].min() > 5 * res.component_gaps[top].min()
    assert res.bound < met.bound <= spectral_gap(st.chain)


def test_gap_bound_formula():
    assert st_gap_bound(0.3, 0.2, 0.5) == pytest.approx(min(0.1, 0.06 / 1.8))
    assert st_gap_bound(0.3, 1.0, 0.0) == pytest.approx(0.1)
    assert st_gap_bound(0.0, 0.5, 0.5) == 0.0
    for bad in [(-0.1, 0.2, 0.5), (0.1, 0.2, 1.5), (np.nan, 0.2, 0.1)]:
        with pytest.raises(ValueError):
            st_gap_bound(*bad)


def test_bad_inputs():
    st = simulated_tempering_chain(bimodal_means(3.0), h=0.5)
    n, G = st.chain.n, st.points.shape[0]
    level, site = st.level, np.arange(n) % G
    W = np.full((n, 2), 0.5)
    with pytest.raises(ValueError, match="sum to 1"):
        st_decomposition(st.chain, level, site, W * 2)
    with pytest.raises(ValueError, match="shape"):
        st_decomposition(st.chain, level[:-1], site, W)
    with pytest.raises(ValueError, match="exactly one state"):
        st_decomposition(st.chain, level, np.zeros(n, dtype=int), W)
    with pytest.raises(ValueError, match="at least two"):
        st_decomposition(st.chain, level, site, W, omega0=[0])
    with pytest.raises(ValueError, match="component_kernel"):
        st_decomposition(st.chain, level, site, W, component_kernel="gibbs")
    with pytest.raises(ValueError, match="TemperingChain"):
        tempering_decomposition(st.chain)


def test_student_t_components_match_scipy_and_build_a_reversible_chain():
    from scipy import stats

    from sci_moe.theory.spectral import mixture_log_density, mixture_responsibilities

    x = np.linspace(-30, 30, 61)[:, None]
    means = [[-2.0], [3.0]]
    lp = mixture_log_density(x, means, sigma=1.5, weights=[0.3, 0.7], dof=1.5)
    want = np.log(
        0.3 * stats.t.pdf(x[:, 0], 1.5, loc=-2, scale=1.5)
        + 0.7 * stats.t.pdf(x[:, 0], 1.5, loc=3, scale=1.5)
    )
    np.testing.assert_allclose(lp, want, rtol=1e-12)
    W = mixture_responsibilities(x, means, 1.5, [0.3, 0.7], beta=0.5, tempering="component",
                                 dof=1.5)  # fmt: skip
    np.testing.assert_allclose(W.sum(1), 1.0)
    # heavy tails: far from both means the responsibilities stay away from 0 and 1
    assert 0.05 < W[0, 0] < 0.95
    with pytest.raises(ValueError, match="dof must be a positive number"):
        mixture_log_density(x, means, dof=0.0)
    st = simulated_tempering_chain(bimodal_means(4.0), h=0.5, pad=8, dof=2.0,
                                   tempering="component")  # fmt: skip
    P, pi = st.chain.P.toarray(), st.chain.pi / st.chain.pi.sum()
    np.testing.assert_allclose(pi[:, None] * P, (pi[:, None] * P).T, atol=1e-15)
    np.testing.assert_allclose(P.sum(1), 1.0)


def test_heavy_tails_shrink_the_full_gap_but_not_the_restricted_one():
    """The claim the restricted gap is for: padding a Student-t target's grid shrinks the
    ST chain's spectral gap and the full-space bound, not the restricted gap on a fixed
    ball nor the restricted bound, which stays below it."""
    out = []
    for pad in (6.0, 24.0):
        st = simulated_tempering_chain(bimodal_means(4.0), betas=[0.25, 1.0], h=0.5, pad=pad,
                                       dof=1.5, tempering="component")  # fmt: skip
        x = st.points[np.arange(st.chain.n) % st.points.shape[0], 0]
        om = np.abs(x) <= 5.0
        out.append((spectral_gap(st.chain), restricted_spectral_gap(st.chain, om),
                    tempering_decomposition(st, om).bound,
                    tempering_decomposition(st).bound))  # fmt: skip
    (g0, r0, b0, f0), (g1, r1, b1, f1) = out
    assert g1 < 0.5 * g0 and f1 < 0.5 * f0
    assert abs(r1 / r0 - 1) < 0.1 and abs(b1 / b0 - 1) < 0.1
    assert 0 < b0 <= r0 and 0 < b1 <= r1
