r"""Projection / restriction chains and decomposition lower bounds on the spectral gap.

Garg, Balasubramanian and Zhou (NeurIPS 2025, arXiv:2505.15059) bound the restricted gap of
simulated tempering from the gaps of restriction chains (local kernels on mixture components)
and of a projected chain on (level, component) labels. Their theorem's constants were not
available as text, so this module implements the *classical* decompositions instead:

* hard partition :math:`\{A_k\}`: Martin–Randall (2000) and Jerrum–Son–Tetali–Vigoda (2004);
* soft (component-weight) decomposition, Ge–Lee–Risteski (2018) style: a JSTV-type bound
  :func:`soft_decomposition_bound`, derived in its docstring (constants ours, not the paper's).

Projection chain of a partition (stationary :math:`\bar\pi(k) = \pi(A_k)`) and restriction
chains (moves leaving :math:`A_k` rejected):

.. math::

    \bar P(k, l) = \frac{1}{\pi(A_k)} \sum_{x \in A_k} \pi(x) P(x, A_l), \qquad
    P_k(x, B) = P(x, B) + \mathbf 1\{x \in B\} P(x, A_k^c).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .chains import ReversibleChain
from .gaps import spectral_gap

__all__ = [
    "BoundCheck",
    "check_bound",
    "escape_probability",
    "jstv_bound",
    "martin_randall_bound",
    "projection_chain",
    "restriction_chain",
    "soft_decomposition_bound",
    "soft_overlap_constant",
    "soft_projection_chain",
    "soft_restriction_chain",
]


def _labels(labels, n):
    labels = np.asarray(labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be an integer array of shape ({n},), got {labels.shape}.")
    uniq, inv = np.unique(labels, return_inverse=True)
    return inv, uniq.size


def _membership(inv, K):
    n = inv.size
    return sp.csr_matrix((np.ones(n), (np.arange(n), inv)), shape=(n, K))


def _weights(W, n):
    W = sp.csr_matrix(W, dtype=float) if sp.issparse(W) else np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] != n:
        raise ValueError(f"soft weights must have shape ({n}, K), got {W.shape}.")
    data = W.data if sp.issparse(W) else W
    rows = np.asarray(W.sum(axis=1)).ravel()
    if data.min() < 0 or not np.allclose(rows, 1.0, atol=1e-10):
        raise ValueError(
            "soft weights W(x, k) must be non-negative and sum to 1 over k for every state "
            "(e.g. component responsibilities w_k p_k(x) / p(x))."
        )
    return sp.csr_matrix(W)


def soft_projection_chain(chain: ReversibleChain, W) -> ReversibleChain:
    r"""Projection chain of a soft decomposition :math:`W(x, k)` (a partition of unity).

    .. math::

        m_k = \sum_x \pi(x) W(x, k), \qquad
        \bar P(k, l) = \frac{1}{m_k} \sum_{x, y} \pi(x) W(x, k) P(x, y) W(y, l),

    reversible with respect to :math:`m`. With indicator weights it is :func:`projection_chain`.
    Components of zero mass must be dropped by the caller.
    """
    Wm = _weights(W, chain.n)
    P = sp.csr_matrix(chain.P)
    flow = (Wm.T @ sp.diags(chain.pi) @ P @ Wm).toarray()
    flow = 0.5 * (flow + flow.T)
    m = flow.sum(axis=1)
    if np.any(m <= 0):
        raise ValueError("every component must have positive mass; drop empty columns of W.")
    return ReversibleChain(flow / m[:, None], m, chain.atol)


def projection_chain(chain: ReversibleChain, labels) -> ReversibleChain:
    r"""Projection chain :math:`\bar P` of the hard partition given by integer ``labels``.

    Blocks are ordered as ``np.unique(labels)``.
    """
    inv, K = _labels(labels, chain.n)
    return soft_projection_chain(chain, _membership(inv, K))


def restriction_chain(chain: ReversibleChain, labels, k) -> ReversibleChain:
    r"""Restriction chain :math:`P_k` on block ``A_k = {labels == k}`` (leaving moves rejected).

    Its stationary law is :math:`\pi` conditioned on :math:`A_k`.
    """
    labels = np.asarray(labels)
    idx = np.flatnonzero(labels == k)
    if idx.size == 0:
        raise ValueError(f"block {k!r} is empty.")
    P = sp.csr_matrix(chain.P)[idx][:, idx]
    stay = 1.0 - np.asarray(P.sum(axis=1)).ravel()
    P = (P + sp.diags(stay)).tocsr()
    return ReversibleChain(P if chain.is_sparse else P.toarray(), chain.pi[idx], chain.atol)


def soft_restriction_chain(chain: ReversibleChain, W, k: int) -> ReversibleChain:
    r"""Metropolis restriction of ``P`` to component ``k`` of a soft decomposition.

    The component law is :math:`\pi_k(x) = \pi(x) W(x, k) / m_k` and, for :math:`x \ne y`,

    .. math::

        P_k(x, y) = P(x, y) \min\{1, W(y, k) / W(x, k)\},

    (rejected mass on the diagonal), so that
    :math:`m_k \pi_k(x) P_k(x, y) = \pi(x) P(x, y) \min\{W(x,k), W(y,k)\}` and
    :math:`\sum_k m_k \mathcal E_{P_k} \le \mathcal E_P`. States with :math:`W(x, k) = 0` are
    dropped; the chain lives on the support of component ``k`` (ordered by state index).
    """
    Wm = _weights(W, chain.n)
    w = np.asarray(Wm[:, k].toarray()).ravel()
    idx = np.flatnonzero(w > 0)
    P = sp.csr_matrix(chain.P)[idx][:, idx].tocoo()
    wk = w[idx]
    keep = P.row != P.col
    r, c, v = P.row[keep], P.col[keep], P.data[keep]
    v = v * np.minimum(1.0, wk[c] / wk[r])
    Q = sp.csr_matrix((v, (r, c)), shape=(idx.size, idx.size))
    Q = (Q + sp.diags(1.0 - np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    return ReversibleChain(Q if chain.is_sparse else Q.toarray(), chain.pi[idx] * wk, chain.atol)


def escape_probability(chain: ReversibleChain, labels) -> float:
    r"""Largest one-step exit probability :math:`\gamma = \max_k \max_{x \in A_k} P(x, A_k^c)`."""
    inv, K = _labels(labels, chain.n)
    PA = sp.csr_matrix(chain.P) @ _membership(inv, K)
    PA = PA.toarray() if sp.issparse(PA) else np.asarray(PA)
    stay = PA[np.arange(chain.n), inv]
    return float(np.max(1.0 - stay))


def martin_randall_bound(gap_projection: float, gap_restrictions) -> float:
    r"""Martin–Randall (2000) disjoint-decomposition bound.

    .. math::

        \mathrm{Gap}(P) \ge \tfrac12\, \mathrm{Gap}(\bar P)\, \min_k \mathrm{Gap}(P_k).
    """
    return 0.5 * float(gap_projection) * float(np.min(gap_restrictions))


def jstv_bound(gap_projection: float, gap_restrictions, gamma: float) -> float:
    r"""Jerrum–Son–Tetali–Vigoda (2004) decomposition bound.

    .. math::

        \mathrm{Gap}(P) \ge \min\Big\{\frac{\mathrm{Gap}(\bar P)}{3},
        \frac{\mathrm{Gap}(\bar P)\,\min_k \mathrm{Gap}(P_k)}{3\gamma + \mathrm{Gap}(\bar P)}\Big\},

    with :math:`\gamma` from :func:`escape_probability`.
    """
    g, lam = float(gap_projection), float(np.min(gap_restrictions))
    return min(g / 3.0, g * lam / (3.0 * gamma + g)) if g > 0 else 0.0


def soft_overlap_constant(chain: ReversibleChain, W) -> float:
    r""":math:`\Gamma = \max_k \sum_{l \ne k} \mathbb E_{\pi_k}[P(x, W_l)^2] / \bar P(k, l)`.

    Here :math:`P(x, W_l) = \sum_y P(x, y) W(y, l)`; for a hard partition
    :math:`\Gamma \le \gamma`.
    """
    Wm = _weights(W, chain.n)
    PW = (sp.csr_matrix(chain.P) @ Wm).toarray()
    Wd = Wm.toarray()
    m = (chain.pi[:, None] * Wd).sum(axis=0)
    flow = (chain.pi[:, None] * Wd).T @ PW  # m_k Pbar(k, l)
    second = (chain.pi[:, None] * Wd).T @ PW**2  # m_k E_{pi_k}[P(x, W_l)^2]
    K = m.size
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(flow > 0, second / flow, 0.0)
    ratio[np.arange(K), np.arange(K)] = 0.0
    return float(ratio.sum(axis=1).max())


def soft_decomposition_bound(gap_projection: float, gap_restrictions, overlap: float) -> float:
    r"""JSTV-type bound for a soft decomposition (derived here; not the paper's constants).

    .. math::

        \mathrm{Gap}(P) \ge \frac{\bar g\, \lambda}{\bar g + 3\lambda + 3\Gamma},
        \qquad \bar g = \mathrm{Gap}(\bar P), \;
        \lambda = \min_k \mathrm{Gap}(P_k),

    with :func:`soft_projection_chain`, :func:`soft_restriction_chain` and
    :math:`\Gamma` = :func:`soft_overlap_constant`. Proof sketch: with
    :math:`\pi = \sum_k m_k \pi_k` and :math:`g_k = \mathbb E_{\pi_k} f`,
    :math:`\mathrm{Var}_\pi f = \sum_k m_k \mathrm{Var}_{\pi_k} f + \mathrm{Var}_m g`; the first
    term is :math:`\le \mathcal E_P / \lambda` because :math:`\sum_k m_k \mathcal E_{P_k} \le
    \mathcal E_P`. Writing :math:`g_k - g_l` through the flow
    :math:`Q_{kl}(x,y) \propto \pi(x)W(x,k)P(x,y)W(y,l)` and Cauchy–Schwarz three times gives
    :math:`\mathcal E_{\bar P}(g) \le 3\mathcal E_P + 3\Gamma \sum_k m_k \mathrm{Var}_{\pi_k} f`,
    and :math:`\mathrm{Var}_m g \le \mathcal E_{\bar P}(g)/\bar g`. Ge–Lee–Risteski (2018) prove a
    bound of this shape for simulated tempering with overlap-rate projection chains.
    """
    g, lam = float(gap_projection), float(np.min(gap_restrictions))
    if g <= 0 or lam <= 0:
        return 0.0
    return g * lam / (g + 3.0 * lam + 3.0 * float(overlap))


@dataclass(frozen=True)
class BoundCheck:
    r"""Result of :func:`check_bound`.

    Attributes
    ----------
    name : str
        Which bound.
    bound : float
        The lower bound on the spectral gap.
    exact_gap : float
        :func:`~sci_moe.theory.spectral.gaps.spectral_gap` of the chain.
    holds : bool
        ``bound <= exact_gap`` (up to ``1e-12`` relative).
    gap_projection, min_gap_restriction : float
        The ingredients.
    """

    name: str
    bound: float
    exact_gap: float
    holds: bool
    gap_projection: float
    min_gap_restriction: float

    @property
    def ratio(self) -> float:
        r"""``exact_gap / bound`` (the slack; ``inf`` for a zero bound)."""
        return self.exact_gap / self.bound if self.bound > 0 else float("inf")


BOUNDS = ("martin-randall", "jstv", "soft")


def check_bound(
    chain: ReversibleChain, partition, bound: str = "jstv", exact_gap: float | None = None
) -> BoundCheck:
    r"""Compute a decomposition bound and compare it with the exact spectral gap.

    Parameters
    ----------
    chain : ReversibleChain
    partition : array_like
        Integer labels of shape (n,) (hard partition) or soft weights of shape (n, K).
    bound : {"martin-randall", "jstv", "soft"}
        ``"soft"`` accepts hard labels too (indicator weights).
    exact_gap : float, optional
        Reuse a known exact gap instead of recomputing it.
    """
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {BOUNDS}, got {bound!r}.")
    soft_input = np.ndim(partition) == 2 or sp.issparse(partition)
    if soft_input and bound != "soft":
        raise ValueError(f"{bound!r} needs a hard partition (integer labels); use bound='soft'.")
    if soft_input:
        W = partition
    else:
        inv, K = _labels(partition, chain.n)
        W = _membership(inv, K)
    if bound == "soft":
        Wm = _weights(W, chain.n)
        Wm = Wm[:, np.flatnonzero(np.asarray(Wm.sum(axis=0)).ravel() > 0)]
        proj = soft_projection_chain(chain, Wm)
        lams = [spectral_gap(soft_restriction_chain(chain, Wm, k)) for k in range(Wm.shape[1])]
        g = spectral_gap(proj)
        value = soft_decomposition_bound(g, lams, soft_overlap_constant(chain, Wm))
    else:
        proj = projection_chain(chain, inv)
        lams = [spectral_gap(restriction_chain(chain, inv, k)) for k in range(K)]
        g = spectral_gap(proj)
        if bound == "martin-randall":
            value = martin_randall_bound(g, lams)
        else:
            value = jstv_bound(g, lams, escape_probability(chain, inv))
    gap = spectral_gap(chain) if exact_gap is None else float(exact_gap)
    return BoundCheck(bound, value, gap, bool(value <= gap * (1 + 1e-12) + 1e-15), g, min(lams))
