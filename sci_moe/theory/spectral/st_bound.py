r"""Restricted-spectral-gap decomposition for simulated tempering on mixtures.

The form of Garg, Balasubramanian and Zhou (NeurIPS 2025, arXiv:2505.15059): simulated
tempering (ST) on pairs :math:`s = (i, x)` (level, point) with target

.. math::

    \pi(i, x) = r_i\, p_i(x), \qquad p_i = \sum_j w_{ij}\, p_{ij} \quad \text{at every level},

an arbitrary :math:`p_i`-reversible local kernel at each level, and a lower bound on the
:math:`\Omega^0`-restricted spectral gap from (a) the restricted gaps of the local kernel on
each component :math:`p_{ij}` and (b) the spectral gap of a projected chain on the labels
:math:`(i, j)`. The paper's text (theorem statement and constants) was not available here
(only its abstract); the theorem below is **derived here**, in that form, with its own
constants and the full proof in :func:`st_decomposition`.

Every ingredient is read off the chain itself: the local kernel is the part of :math:`P`
that stays on a level, the level moves are the transitions :math:`(i, x) \to (i', x)`,
:math:`i' \ne i`, and the components are given by their responsibilities
:math:`W(s, j) = w_{ij} p_{ij}(x) / p_i(x)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .builders import TemperingChain
from .chains import ReversibleChain
from .decomposition import restriction_chain, soft_restriction_chain
from .gaps import _mask, spectral_gap

__all__ = ["STDecomposition", "st_decomposition", "st_gap_bound", "tempering_decomposition"]


def st_gap_bound(gap_projection: float, min_component_gap: float, escape: float) -> float:
    r"""The decomposition bound on the spectral gap of the (restricted) ST chain.

    .. math::

        \mathrm{Gap}(P^0) \ge \min\Big\{\frac{\bar g}{3},
        \frac{\bar g\, \lambda}{\bar g + 3 \bar a}\Big\},

    proved in :func:`st_decomposition` (constants derived here, not the paper's).

    Parameters
    ----------
    gap_projection : float
        :math:`\bar g`, spectral gap of the projected chain on (level, component).
    min_component_gap : float
        :math:`\lambda = \min_k \lambda_k`, smallest gap of the component kernels.
    escape : float
        :math:`\bar a`, largest one-step probability of a level move, in [0, 1].

    Returns
    -------
    float
        The lower bound (0 when either gap is 0).
    """
    g, lam, a = float(gap_projection), float(min_component_gap), float(escape)
    if not (np.isfinite(g) and np.isfinite(lam) and np.isfinite(a)):
        raise ValueError("gap_projection, min_component_gap and escape must be finite.")
    if g < 0 or lam < 0 or not 0 <= a <= 1:
        raise ValueError(
            f"gaps must be >= 0 and escape in [0, 1]; got gap_projection={g}, "
            f"min_component_gap={lam}, escape={a}."
        )
    if g == 0 or lam == 0:
        return 0.0
    return min(g / 3.0, g * lam / (g + 3.0 * a))


@dataclass(frozen=True)
class STDecomposition:
    r"""Result of :func:`st_decomposition`.

    Attributes
    ----------
    bound : float
        Lower bound on the :math:`\Omega^0`-restricted gap :math:`\mathrm{Gap}_{\Omega^0}(P)`
        (on the spectral gap when :math:`\Omega^0 = \Omega`).
    gap_bound : float
        :func:`st_gap_bound`, the bound on :math:`\mathrm{Gap}(P^0)`;
        ``bound = gap_bound / omega_mass``.
    gap_projection : float
        :math:`\bar g`.
    component_gaps : ndarray, shape (n_components,)
        :math:`\lambda_k` of each component kernel (on :math:`\Omega^0`).
    escape : float
        :math:`\bar a`.
    omega_mass : float
        :math:`\pi(\Omega^0)`.
    component_level, component_index : ndarray of int, shape (n_components,)
        Level :math:`i` and mixture index :math:`j` of each component.
    component_mass : ndarray, shape (n_components,)
        :math:`m_k = \pi^0(\text{component } k)`.
    projection : ReversibleChain
        The projected chain on the components.
    """

    bound: float
    gap_bound: float
    gap_projection: float
    component_gaps: np.ndarray
    escape: float
    omega_mass: float
    component_level: np.ndarray
    component_index: np.ndarray
    component_mass: np.ndarray
    projection: ReversibleChain

    @property
    def min_component_gap(self) -> float:
        r""":math:`\lambda = \min_k \lambda_k`."""
        return float(self.component_gaps.min())


def _int_array(a, n, name):
    a = np.asarray(a)
    if a.shape != (n,) or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array of shape ({n},), got {a.shape}.")
    if a.min() < 0:
        raise ValueError(f"{name} must be non-negative.")
    return a.astype(np.int64)


def _metropolis_component(local: ReversibleChain, Wb, k: int) -> ReversibleChain:
    r"""The local kernel's proposal re-targeted at component ``k`` (:func:`st_decomposition`)."""
    pi = local.pi
    F = (sp.diags(pi) @ local.P).tocsr()
    F = (0.5 * (F + F.T)).tocoo()
    off = F.row != F.col
    r, c, f = F.row[off], F.col[off], F.data[off]
    wk = np.asarray(Wb[:, k].toarray()).ravel()
    mk = pi * wk  # unnormalised component law m_k pi_k
    idx = np.flatnonzero(mk > 0)
    pos = np.full(pi.size, -1)
    pos[idx] = np.arange(idx.size)
    keep = (pos[r] >= 0) & (pos[c] >= 0)
    r, c, f = r[keep], c[keep], f[keep]
    q = f / np.minimum(pi[r], pi[c])  # symmetric "proposal" Q(s, t)
    v = q * np.minimum(1.0, mk[c] / mk[r])
    M = sp.csr_matrix((v, (pos[r], pos[c])), shape=(idx.size, idx.size))
    rows = np.asarray(M.sum(axis=1)).ravel()
    M = M / max(1.0, float(rows.max(initial=0.0)))
    M = (M + sp.diags(1.0 - np.asarray(M.sum(axis=1)).ravel())).tocsr()
    return ReversibleChain(M, mk[idx], local.atol)


COMPONENT_KERNELS = ("metropolis", "restriction")


def st_decomposition(
    chain: ReversibleChain,
    level,
    site,
    responsibilities,
    omega0=None,
    component_kernel: str = "metropolis",
):
    r"""Restricted-gap decomposition bound for simulated tempering on a mixture.

    Setting. States :math:`s = (i, x)`; ``chain`` is any :math:`P` reversible with respect
    to :math:`\pi(i, x) = r_i p_i(x)`, :math:`p_i = \sum_j w_{ij} p_{ij}`;
    ``responsibilities`` holds :math:`W(s, j) = w_{ij} p_{ij}(x) / p_i(x)` (rows sum to 1),
    so that component :math:`k = (i, j)` has mass :math:`m_k = r_i w_{ij}` and law
    :math:`\pi_k(i, x) = p_{ij}(x)`. For :math:`\Omega^0 \subset \Omega` let :math:`P^0` be
    :math:`P` with moves leaving :math:`\Omega^0` rejected, :math:`\pi^0 = \pi(\cdot \mid
    \Omega^0)`, and split its Dirichlet form over the edges it uses:

    .. math::

        \mathcal E_{P^0}(f) \ge \mathcal E_W(f) + \mathcal E_T(f),

    :math:`\mathcal E_W` over same-level moves :math:`(i,x) \to (i,y)` (the local kernel),
    :math:`\mathcal E_T` over level moves :math:`(i,x) \to (i',x)`, :math:`i' \ne i`. Define

    * component kernels (the local kernel on component :math:`k`), reversible w.r.t.
      :math:`\pi^0_k \propto \pi^0 W(\cdot, j)` on level :math:`i`, for :math:`s \ne t`:
      ``"metropolis"`` (default): with the symmetric flow :math:`Q(s,t) = \pi^0(s)P(s,t) /
      \min\{\pi^0(s), \pi^0(t)\}` (for a Metropolis local kernel, its proposal),
      :math:`M_k(s,t) = Q(s,t) \min\{1, \pi^0_k(t)/\pi^0_k(s)\} / c_k`, the same proposal
      targeting :math:`p_{ij}` (:math:`c_k \ge 1` the largest row sum, 1 for Metropolis);
      ``"restriction"``: :math:`M_k(s,t) = P^0(s,t)\min\{1, W(t,j)/W(s,j)\}`, defined for
      any kernel but Peskun-smaller, hence a looser bound. :math:`\lambda_k =
      \mathrm{Gap}(M_k) = \pi_k(\Omega^0)\,\mathrm{Gap}_{\Omega^0}(M_k^{\Omega})`, i.e. the
      :math:`\Omega^0`-restricted gap of the local kernel on component :math:`k` up to the
      factor :math:`\pi_k(\Omega^0)`; :math:`\lambda = \min_k \lambda_k`;
    * the projected chain :math:`\bar P` on :math:`(i, j)`, with flows
      :math:`m_k \bar P(k,l) = \sum_x \pi^0(i,x) P(ix, i'x) W(ix, j) W(i'x, j')` for
      :math:`k = (i,j)`, :math:`l = (i',j')`, :math:`i' \ne i` (reversible w.r.t. :math:`m`),
      :math:`\bar g = \mathrm{Gap}(\bar P)`;
    * :math:`\bar a = \max_{s \in \Omega^0} P(s, \{\text{level moves within } \Omega^0\})`.

    **Theorem** (derived here; the paper's constants were not available).

    .. math::

        \mathrm{Gap}_{\Omega^0}(P) \ge \frac{1}{\pi(\Omega^0)}
        \min\Big\{\frac{\bar g}{3}, \frac{\bar g\, \lambda}{\bar g + 3 \bar a}\Big\}.

    *Proof.* (0) With :math:`\mathcal E^{\Omega^0}`, :math:`V^{\Omega^0}` the numerator and
    denominator of :func:`~sci_moe.theory.spectral.restricted_spectral_gap`,
    :math:`\mathcal E_{P^0} = \mathcal E^{\Omega^0} / \pi(\Omega^0)` and
    :math:`\mathrm{Var}_{\pi^0} = V^{\Omega^0} / \pi(\Omega^0)^2`, so
    :math:`\mathrm{Gap}_{\Omega^0}(P) = \mathrm{Gap}(P^0) / \pi(\Omega^0)`; it remains to
    bound :math:`\mathrm{Gap}(P^0)`. (1) Law of total variance for
    :math:`\pi^0 = \sum_k m_k \pi^0_k` with :math:`\bar f_k = \mathbb E_{\pi^0_k} f`:
    :math:`\mathrm{Var}_{\pi^0} f = V + \mathrm{Var}_m \bar f`,
    :math:`V = \sum_k m_k \mathrm{Var}_{\pi^0_k} f`. (2) On level :math:`i`, "metropolis":
    :math:`m_k \pi^0_k(s) M_k(s,t) \le Q(s,t)\min\{\pi^0(s)W(s,j), \pi^0(t)W(t,j)\}` and
    :math:`\sum_j \min\{a_j, b_j\} \le \min\{\sum_j a_j, \sum_j b_j\}` bound the sum over
    :math:`j` by :math:`Q(s,t)\min\{\pi^0(s),\pi^0(t)\} = \pi^0(s)P(s,t)`; "restriction":
    :math:`m_k \pi^0_k(s) M_k(s,t) = \pi^0(s) P(s,t) \min\{W(s,j), W(t,j)\}` and
    :math:`\sum_j \min\{W(s,j),W(t,j)\} \le 1`. Either way
    :math:`\sum_k m_k \mathcal E_{M_k} \le \mathcal E_W` and
    :math:`V \le \sum_k m_k \mathcal E_{M_k}(f) / \lambda_k \le \mathcal E_W(f)/\lambda`.
    (3) Write :math:`\bar f_k - \bar f_l = (\bar f_k - f(ix)) + (f(ix) - f(i'x)) + (f(i'x)
    - \bar f_l)` on every level-move edge and use :math:`(a+b+c)^2 \le 3(a^2+b^2+c^2)`. The
    middle terms sum to :math:`3\mathcal E_T(f)` because :math:`\sum_{j,j'} W(ix,j)W(i'x,j')
    = 1`. For the first, :math:`\sum_l m_k \bar P(k,l)`-weights at :math:`x` add up to
    :math:`\pi^0(ix) W(ix,j) a(ix) = m_k \pi^0_k(ix) a(ix)` with :math:`a(s) \le \bar a` the
    level-move probability, giving :math:`\tfrac32 \bar a V`; the third is the same by
    symmetry. Hence :math:`\mathcal E_{\bar P}(\bar f) \le 3\mathcal E_T(f) + 3\bar a V`.
    (4) :math:`\mathrm{Var}_m \bar f \le \mathcal E_{\bar P}(\bar f)/\bar g`. Together,
    :math:`\mathrm{Var}_{\pi^0} f \le V(1 + 3\bar a/\bar g) + 3\mathcal E_T/\bar g \le
    \max\{(\bar g + 3\bar a)/(\bar g\lambda), 3/\bar g\}\,(\mathcal E_W + \mathcal E_T)
    \le \max\{\cdot\}\,\mathcal E_{P^0}(f)`. :math:`\square`

    Parameters
    ----------
    chain : ReversibleChain
        The ST chain, shape (n, n).
    level : array_like of int, shape (n,)
        Level :math:`i` of each state.
    site : array_like of int, shape (n,)
        Point :math:`x` of each state (states sharing a site differ in level only); level
        moves are the transitions between states with equal ``site``.
    responsibilities : array_like, shape (n, K)
        :math:`W(s, j)`, non-negative, rows summing to 1.
    omega0 : array_like of bool, shape (n,), or of int, optional
        :math:`\Omega^0` as a mask or state indices; ``None`` is the whole space (the bound
        is then on the spectral gap).
    component_kernel : {"metropolis", "restriction"}
        How the local kernel acts on one component (see above).

    Returns
    -------
    STDecomposition
    """
    if component_kernel not in COMPONENT_KERNELS:
        raise ValueError(
            f"component_kernel must be one of {COMPONENT_KERNELS}, got {component_kernel!r}."
        )
    n = chain.n
    level = _int_array(level, n, "level")
    site = _int_array(site, n, "site")
    W = np.asarray(responsibilities, dtype=float)
    if W.ndim != 2 or W.shape[0] != n:
        raise ValueError(f"responsibilities must have shape ({n}, K), got {W.shape}.")
    if not np.all(np.isfinite(W)) or W.min() < 0 or not np.allclose(W.sum(1), 1.0, atol=1e-9):
        raise ValueError(
            "responsibilities must be finite, non-negative and sum to 1 over components "
            "for every state (W(s, j) = w_ij p_ij(x) / p_i(x))."
        )
    if np.unique(np.stack([level, site]), axis=1).shape[1] != n:
        raise ValueError("every (level, site) pair must name exactly one state.")
    if omega0 is None:
        idx, mass = np.arange(n), 1.0
        P0 = chain
    else:
        mask = _mask(omega0, n)
        idx = np.flatnonzero(mask)
        if idx.size < 2:
            raise ValueError("omega0 must contain at least two states.")
        mass = float(chain.pi[idx].sum())
        P0 = restriction_chain(chain, mask.astype(np.int64), 1)
    lev, sit, W0, pi0 = level[idx], site[idx], W[idx], P0.pi
    n0, K = W0.shape
    L = int(lev.max()) + 1

    F = (sp.diags(pi0) @ sp.csr_matrix(P0.P)).tocoo()
    off = F.row != F.col
    same_level = off & (lev[F.row] == lev[F.col])
    level_move = off & (lev[F.row] != lev[F.col]) & (sit[F.row] == sit[F.col])

    # local kernel: same-level moves only (level moves turned into holding)
    r, c = F.row[same_level], F.col[same_level]
    PW = sp.csr_matrix((F.data[same_level] / pi0[r], (r, c)), shape=(n0, n0))
    PW = (PW + sp.diags(1.0 - np.asarray(PW.sum(axis=1)).ravel())).tocsr()
    local = ReversibleChain(PW, pi0, chain.atol)

    # components k = (i, j): column i * K + j of the level-blocked weights
    cols = lev[:, None] * K + np.arange(K)[None, :]
    Wb = sp.csr_matrix((W0.ravel(), (np.repeat(np.arange(n0), K), cols.ravel())), shape=(n0, L * K))
    m = np.asarray((sp.diags(pi0) @ Wb).sum(axis=0)).ravel()
    keep = np.flatnonzero(m > 0)
    Wb = Wb[:, keep].tocsr()

    make = _metropolis_component if component_kernel == "metropolis" else soft_restriction_chain
    gaps = np.array([spectral_gap(make(local, Wb, k)) for k in range(keep.size)])

    r, c = F.row[level_move], F.col[level_move]
    T = sp.csr_matrix((F.data[level_move], (r, c)), shape=(n0, n0))
    flow = (Wb.T @ T @ Wb).toarray()
    flow = 0.5 * (flow + flow.T)
    np.fill_diagonal(flow, 0.0)
    mk = m[keep]
    Pbar = flow / mk[:, None]
    Pbar[np.diag_indices_from(Pbar)] = 1.0 - Pbar.sum(axis=1)
    projection = ReversibleChain(Pbar, mk, chain.atol)
    if keep.size < 2:
        g = 1.0
    else:
        s = np.sqrt(projection.pi)
        S = s[:, None] * Pbar / s[None, :]
        g = float(1.0 - sla.eigvalsh(0.5 * (S + S.T))[-2])
        g = max(g, 0.0)
    escape = float(np.max(np.asarray(T.sum(axis=1)).ravel() / pi0)) if T.nnz else 0.0
    escape = min(escape, 1.0)
    gb = st_gap_bound(g, float(gaps.min()), escape)
    return STDecomposition(
        bound=gb / mass,
        gap_bound=gb,
        gap_projection=g,
        component_gaps=gaps,
        escape=escape,
        omega_mass=mass,
        component_level=keep // K,
        component_index=keep % K,
        component_mass=mk,
        projection=projection,
    )


def tempering_decomposition(
    st: TemperingChain, omega0=None, component_kernel: str = "metropolis"
) -> STDecomposition:
    r""":func:`st_decomposition` of a chain built by
    :func:`~sci_moe.theory.spectral.simulated_tempering_chain`.

    The components are the mixture's components at every level, with the builder's
    responsibilities (``tempering="component"``: exactly the Gaussians
    :math:`\mathcal N(\mu_j, \sigma^2/\beta_i)`; ``"power"``: :math:`p_{ij} \propto
    p_i\, (w_j \mathcal N_j)^{\beta_i} / \sum_l (w_l \mathcal N_l)^{\beta_i}`).

    Parameters
    ----------
    st : TemperingChain
    omega0 : array_like of bool, shape (n,), or of int, optional
        :math:`\Omega^0`; ``None`` for the whole space.
    component_kernel : {"metropolis", "restriction"}
        See :func:`st_decomposition`; ``"metropolis"`` is, for the builder's grid RWMH, the
        level's proposal targeting the component.

    Returns
    -------
    STDecomposition
    """
    if not isinstance(st, TemperingChain):
        raise ValueError("st must be a TemperingChain (from simulated_tempering_chain).")
    n, L = st.chain.n, st.betas.size
    G = st.points.shape[0]
    K = st.soft_weights.shape[1] // L
    cols = st.level[:, None] * K + np.arange(K)[None, :]
    W = np.take_along_axis(np.asarray(st.soft_weights), cols, axis=1)
    return st_decomposition(st.chain, st.level, np.arange(n) % G, W, omega0, component_kernel)
