r"""Finite reversible Markov chains: validation, laziness, Dirichlet forms.

A chain is a row-stochastic matrix :math:`P` (dense ``numpy`` array or ``scipy.sparse``)
together with a stationary distribution :math:`\pi` for which detailed balance holds,

.. math::

    P \ge 0, \qquad \sum_y P(x, y) = 1, \qquad \pi(x) P(x, y) = \pi(y) P(y, x).

Every tool in :mod:`sci_moe.theory.spectral` works on a :class:`ReversibleChain`, so these
conditions are checked once, when the chain is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["ReversibleChain", "dirichlet_form", "lazy", "validate_chain"]


def _as_matrix(P):
    if sp.issparse(P):
        return sp.csr_matrix(P, dtype=float)
    P = np.asarray(P, dtype=float)
    if P.ndim != 2:
        raise ValueError(f"P must be a 2-D matrix, got an array of shape {P.shape}.")
    return P


def validate_chain(P, pi, atol: float = 1e-10):
    r"""Check that ``P`` is stochastic and reversible with respect to ``pi``.

    Parameters
    ----------
    P : ndarray or scipy.sparse matrix, shape (n, n)
        Transition matrix, rows indexed by the current state.
    pi : array_like, shape (n,)
        Candidate stationary distribution (normalised here if it sums to a positive number).
    atol : float
        Absolute tolerance for the row sums and for detailed balance
        :math:`|\pi(x)P(x,y) - \pi(y)P(y,x)| \le \mathrm{atol}\,\max(\pi)`.

    Returns
    -------
    P, pi
        ``P`` as float CSR (if sparse) or a float array, ``pi`` as a normalised float array.

    Raises
    ------
    ValueError
        With a message naming the failed condition and the worst offending state.
    """
    P = _as_matrix(P)
    n = P.shape[0]
    if P.shape != (n, n):
        raise ValueError(f"P must be square, got shape {P.shape}.")
    pi = np.asarray(pi, dtype=float).ravel()
    if pi.shape != (n,):
        raise ValueError(f"pi must have length {n} (the number of states), got {pi.shape}.")
    if not np.all(np.isfinite(pi)) or np.any(pi <= 0):
        raise ValueError(
            "pi must be finite and strictly positive; drop states of zero mass from the chain."
        )
    pi = pi / pi.sum()
    data = P.data if sp.issparse(P) else P
    if not np.all(np.isfinite(data)):
        raise ValueError("P has non-finite entries.")
    if data.size and data.min() < -atol:
        raise ValueError(f"P has negative entries (min {data.min():.3g}); P must be stochastic.")
    rows = np.asarray(P.sum(axis=1)).ravel()
    bad = int(np.argmax(np.abs(rows - 1.0)))
    if abs(rows[bad] - 1.0) > atol:
        raise ValueError(
            f"P is not stochastic: row {bad} sums to {rows[bad]:.12g}, not 1. "
            "Put the rejected mass on the diagonal."
        )
    if sp.issparse(P):
        F = sp.diags(pi) @ P
        diff = abs(F - F.T)
        worst = diff.max() if diff.nnz else 0.0
    else:
        F = pi[:, None] * P
        worst = np.abs(F - F.T).max()
    if worst > atol * pi.max():
        raise ValueError(
            f"pi is not a reversible stationary distribution of P: detailed balance "
            f"pi(x)P(x,y) = pi(y)P(y,x) is violated by {worst:.3g}. Pass the chain's own "
            "stationary distribution (or make the chain reversible, e.g. by a Metropolis step)."
        )
    return P, pi


@dataclass(frozen=True)
class ReversibleChain:
    r"""A finite Markov chain ``P`` reversible with respect to ``pi`` (checked on creation).

    Parameters
    ----------
    P : ndarray or scipy.sparse matrix, shape (n, n)
        Row-stochastic transition matrix.
    pi : ndarray, shape (n,)
        Stationary distribution; normalised on creation.
    atol : float
        Tolerance of the checks in :func:`validate_chain`.
    """

    P: object
    pi: np.ndarray
    atol: float = 1e-10

    def __post_init__(self):
        P, pi = validate_chain(self.P, self.pi, self.atol)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "pi", pi)

    @property
    def n(self) -> int:
        r"""Number of states."""
        return self.P.shape[0]

    @property
    def is_sparse(self) -> bool:
        r"""Whether ``P`` is stored as a scipy sparse matrix."""
        return sp.issparse(self.P)

    def dense(self) -> np.ndarray:
        r"""``P`` as a dense array."""
        return self.P.toarray() if self.is_sparse else np.asarray(self.P)


def lazy(chain: ReversibleChain, alpha: float = 0.5) -> ReversibleChain:
    r"""Lazy version :math:`\alpha I + (1 - \alpha) P` (same ``pi``, spectrum in
    :math:`[2\alpha - 1, 1]`).

    Parameters
    ----------
    chain : ReversibleChain
    alpha : float in [0, 1)
        Holding probability added to every state.
    """
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must lie in [0, 1), got {alpha}.")
    if chain.is_sparse:
        P = alpha * sp.identity(chain.n, format="csr") + (1.0 - alpha) * chain.P
    else:
        P = alpha * np.eye(chain.n) + (1.0 - alpha) * chain.P
    return ReversibleChain(P, chain.pi, chain.atol)


def dirichlet_form(chain: ReversibleChain, f) -> float:
    r"""Dirichlet form of ``f``.

    .. math::

        \mathcal{E}_P(f, f) = \tfrac12 \sum_{x, y} \pi(x) P(x, y) (f(y) - f(x))^2
        = \langle f, (I - P) f \rangle_\pi .
    """
    f = np.asarray(f, dtype=float)
    if f.shape != (chain.n,):
        raise ValueError(f"f must have shape ({chain.n},), got {f.shape}.")
    Pf = chain.P @ f
    return float(np.sum(chain.pi * f * (f - Pf)))
