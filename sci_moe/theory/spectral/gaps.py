r"""Spectral gaps, restricted spectral gaps and total-variation distances of reversible chains.

For a chain reversible with respect to :math:`\pi`, the symmetrised operator

.. math::

    S = \Pi^{1/2} P \Pi^{-1/2}, \qquad \Pi = \mathrm{diag}(\pi),

is symmetric with the spectrum of :math:`P` and top eigenvector :math:`\sqrt{\pi}`, so

.. math::

    \mathrm{Gap}(P) = \inf_f \frac{\mathcal{E}_P(f, f)}{\mathrm{Var}_\pi(f)} = 1 - \lambda_2 .

Small chains use a dense ``eigvalsh``; large ones ``scipy.sparse.linalg.eigsh`` on :math:`S`
with :math:`\sqrt{\pi}` deflated (never ``eigs`` on the non-symmetric :math:`P`).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

from .chains import ReversibleChain

__all__ = [
    "exit_probability",
    "restricted_spectral_gap",
    "spectral_gap",
    "symmetrised",
    "tv_distance",
]

DENSE_LIMIT = 2500


def symmetrised(chain: ReversibleChain):
    r"""The symmetric matrix :math:`S = \Pi^{1/2} P \Pi^{-1/2}` (same storage as ``P``).

    It is symmetrised once more, :math:`(S + S^T)/2`, to remove rounding asymmetry.
    """
    s = np.sqrt(chain.pi)
    if chain.is_sparse:
        S = sp.diags(s) @ chain.P @ sp.diags(1.0 / s)
        return ((S + S.T) * 0.5).tocsr()
    S = s[:, None] * chain.P / s[None, :]
    return 0.5 * (S + S.T)


def spectral_gap(
    chain: ReversibleChain, method: str = "auto", tol: float = 1e-12, absolute: bool = False
) -> float:
    r"""Spectral gap :math:`1 - \lambda_2` of a reversible chain.

    Parameters
    ----------
    chain : ReversibleChain
    method : {"auto", "dense", "sparse"}
        ``"dense"``: ``eigvalsh`` of :math:`S`. ``"sparse"``: largest algebraic eigenvalue of
        :math:`S - \sqrt{\pi}\sqrt{\pi}^T` by ``eigsh(which="LA")``. ``"auto"``: dense up to
        2500 states.
    tol : float
        Tolerance passed to ``eigsh``.
    absolute : bool
        If True return the absolute gap :math:`1 - \max(\lambda_2, |\lambda_n|)`.

    Returns
    -------
    float
        The (relative, unless ``absolute``) spectral gap, in ``[0, 2]``.

    Notes
    -----
    Eigenvalues carry an absolute error of a few ``1e-16``, so gaps below ``~1e-11`` (e.g.
    RWMH on a mixture with separation ``D >= 16``) lose relative accuracy.
    """
    if method not in ("auto", "dense", "sparse"):
        raise ValueError(f"method must be 'auto', 'dense' or 'sparse', got {method!r}.")
    n = chain.n
    if n == 1:
        return 1.0
    if method == "auto":
        method = "dense" if n <= DENSE_LIMIT else "sparse"
    if method == "sparse" and n < 4:
        method = "dense"
    S = symmetrised(chain)
    if method == "dense":
        S = S.toarray() if sp.issparse(S) else S
        ev = sla.eigvalsh(S)
        lam2, lamn = ev[-2], ev[0]
    else:
        s = np.sqrt(chain.pi)
        Ss = sp.csr_matrix(S)
        op = LinearOperator((n, n), matvec=lambda v: Ss @ v - s * (s @ v), dtype=float)
        ncv = min(n - 1, 40)
        lam2 = float(eigsh(op, k=1, which="LA", tol=tol, ncv=ncv, return_eigenvectors=False)[0])
        lamn = -1.0
        if absolute:
            lamn = float(eigsh(op, k=1, which="SA", tol=tol, ncv=ncv, return_eigenvectors=False)[0])
    if absolute:
        return float(1.0 - max(lam2, abs(lamn)))
    return float(1.0 - lam2)


def _mask(omega0, n):
    omega0 = np.asarray(omega0)
    if omega0.dtype == bool:
        if omega0.shape != (n,):
            raise ValueError(f"A boolean omega0 must have shape ({n},), got {omega0.shape}.")
        return omega0
    mask = np.zeros(n, dtype=bool)
    mask[omega0.astype(int)] = True
    return mask


def restricted_spectral_gap(chain: ReversibleChain, omega0) -> float:
    r""":math:`\Omega^0`-restricted spectral gap (Atchadé 2021), by a generalised eigenproblem.

    .. math::

        \mathrm{Gap}_{\Omega^0}(P) = \inf_f
        \frac{\tfrac12 \sum_{x, y \in \Omega^0} (f(y) - f(x))^2 \pi(x) P(x, y)}
             {\tfrac12 \sum_{x, y \in \Omega^0} (f(y) - f(x))^2 \pi(x) \pi(y)} .

    Numerator and denominator are the quadratic forms of the graph Laplacians
    :math:`L_E = \mathrm{diag}(W\mathbf 1) - W`, :math:`W_{xy} = \pi(x)P(x,y)`, and
    :math:`L_V = \pi(\Omega^0)\mathrm{diag}(\pi) - \pi\pi^T` on :math:`\Omega^0`; both vanish on
    constants, so the gap is the smallest eigenvalue of :math:`L_E f = \lambda L_V f` on
    :math:`\mathbf 1^\perp` (dense ``scipy.linalg.eigh``). No normalisation by
    :math:`\pi(\Omega^0)` is applied; with :math:`\Omega^0 = \Omega` this is
    :func:`spectral_gap`.

    Parameters
    ----------
    chain : ReversibleChain
    omega0 : array_like of bool, shape (n,), or of int
        The subset :math:`\Omega^0`, as a mask or as state indices (at least two states).
    """
    mask = _mask(omega0, chain.n)
    idx = np.flatnonzero(mask)
    m = idx.size
    if m < 2:
        raise ValueError("omega0 must contain at least two states.")
    if m > 4 * DENSE_LIMIT:
        raise ValueError(f"omega0 has {m} states; the dense generalised eigenproblem is limited.")
    P = chain.P[idx][:, idx]
    P = P.toarray() if sp.issparse(P) else np.asarray(P)
    p = chain.pi[idx]
    W = p[:, None] * P
    W = 0.5 * (W + W.T)
    np.fill_diagonal(W, 0.0)
    LE = np.diag(W.sum(axis=1)) - W
    LV = p.sum() * np.diag(p) - np.outer(p, p)
    # orthonormal basis of 1-perp
    Q = sla.null_space(np.ones((1, m)))
    A = Q.T @ LE @ Q
    B = Q.T @ LV @ Q
    ev = sla.eigh(0.5 * (A + A.T), 0.5 * (B + B.T), eigvals_only=True, subset_by_index=[0, 0])
    return float(max(ev[0], 0.0))


def tv_distance(chain: ReversibleChain, start, n_steps: int) -> np.ndarray:
    r"""Total-variation distance to ``pi`` after each number of steps up to ``n_steps``.

    .. math::

        \|\mu - \pi\|_{TV} = \tfrac12 \sum_x |\mu(x) - \pi(x)| .

    Parameters
    ----------
    chain : ReversibleChain
    start : int or array_like, shape (n,)
        A start state, or an initial distribution :math:`\mu_0`.
    n_steps : int

    Returns
    -------
    ndarray, shape (n_steps + 1,)
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}.")
    if np.ndim(start) == 0:
        s = int(start)
        if not 0 <= s < chain.n:
            raise ValueError(f"start state {s} is outside 0..{chain.n - 1}.")
        mu = np.zeros(chain.n)
        mu[s] = 1.0
    else:
        mu = np.asarray(start, dtype=float)
        if mu.shape != (chain.n,) or np.any(mu < 0) or not np.isclose(mu.sum(), 1.0):
            raise ValueError("start must be a state index or a probability vector of length n.")
    PT = chain.P.T.tocsr() if chain.is_sparse else np.asarray(chain.P).T
    out = np.empty(n_steps + 1)
    for t in range(n_steps + 1):
        out[t] = 0.5 * np.abs(mu - chain.pi).sum()
        if t < n_steps:
            mu = PT @ mu
    return out


def exit_probability(chain: ReversibleChain, omega0, start, n_steps: int) -> np.ndarray:
    r"""Probability that the chain has left :math:`\Omega^0` by each step up to ``n_steps``.

    .. math::

        \ell_t = 1 - \mu_0 (P_{\Omega^0})^t \mathbf 1, \qquad
        P_{\Omega^0} = P \text{ restricted to } \Omega^0 \times \Omega^0 ,

    the leakage that a restricted gap does not control (``sup_t`` of it is the term added to
    restricted-gap mixing bounds). Non-decreasing in ``t``; zero when :math:`\Omega^0 = \Omega`.

    Parameters
    ----------
    chain : ReversibleChain
    omega0 : array_like of bool, shape (n,), or of int
    start : int or array_like, shape (n,)
        A start state or an initial distribution; mass outside :math:`\Omega^0` counts as
        already exited.
    n_steps : int
    """
    mask = _mask(omega0, chain.n)
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}.")
    if np.ndim(start) == 0:
        mu = np.zeros(chain.n)
        mu[int(start)] = 1.0
    else:
        mu = np.asarray(start, dtype=float)
        if mu.shape != (chain.n,) or np.any(mu < 0) or not np.isclose(mu.sum(), 1.0):
            raise ValueError("start must be a state index or a probability vector of length n.")
    idx = np.flatnonzero(mask)
    PT = sp.csr_matrix(chain.P)[idx][:, idx].T.tocsr()
    nu = mu[idx]
    out = np.empty(n_steps + 1)
    for t in range(n_steps + 1):
        out[t] = 1.0 - nu.sum()
        if t < n_steps:
            nu = PT @ nu
    return out
