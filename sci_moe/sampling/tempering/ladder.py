"""Inverse-temperature ladders: geometric, and adapted to a target acceptance rate.

Ladders are increasing tensors ``betas`` of shape ``(L,)`` with ``betas[-1] == 1`` (the
target) and ``betas[0] == beta_min`` (the hottest level). Level 0 is the hottest.
"""

from __future__ import annotations

import math

import torch
from scipy.special import erfcinv
from torch import Tensor

from .kernels import RWMH, LogProb

__all__ = ["adaptive_ladder", "geometric_ladder"]


def geometric_ladder(beta_min: float, n_levels: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """Geometric ladder :math:`\\beta_l = \\beta_{\\min}^{1 - l/(L-1)}`, ``l = 0..L-1``.

    Equivalent to OpenMM's :math:`T_k = T_{\\min}(T_{\\max}/T_{\\min})^{k/(n-1)}` read from the
    cold end.

    Returns
    -------
    Tensor, shape (n_levels,)
        Increasing inverse temperatures ending at 1.
    """
    if not 0 < beta_min < 1:
        raise ValueError(f"beta_min must lie in (0, 1), got {beta_min}")
    if n_levels < 2:
        raise ValueError(f"n_levels must be >= 2 (one hot and one target level), got {n_levels}")
    frac = torch.linspace(0, 1, n_levels, dtype=torch.float64)
    betas = torch.as_tensor(beta_min, dtype=torch.float64) ** (1 - frac)
    betas[-1] = 1.0
    return betas.to(dtype or torch.get_default_dtype())


def adaptive_ladder(
    log_prob: LogProb,
    x0: Tensor,
    *,
    beta_min: float,
    target_acceptance: float = 0.4,
    n_steps: int = 400,
    step_size: float = 1.0,
    max_levels: int = 64,
    seed: int | None = None,
) -> Tensor:
    """Build a ladder from ``beta = 1`` downwards so neighbour moves hit a target acceptance.

    At the current level a short batched RWMH run (step ``step_size / sqrt(beta)``) estimates
    the standard deviation :math:`\\sigma_\\beta` of :math:`\\log p(x)`. Under a Gaussian
    approximation of that distribution, a swap between :math:`\\beta` and
    :math:`\\beta - \\Delta` is accepted with probability
    :math:`\\operatorname{erfc}(\\sqrt{m}/2)`, with
    :math:`m = \\Delta^2\\sigma_\\beta\\sigma_{\\beta'}`.
    Assuming a constant heat capacity, :math:`\\sigma_{\\beta'} = \\sigma_\\beta\\beta/\\beta'`, so
    the ratio :math:`r = \\beta'/\\beta` solves :math:`(1-r)^2/r = k^2` with
    :math:`k = 2\\operatorname{erfc}^{-1}(a^*)/(\\sigma_\\beta\\beta)`:

    .. math:: r = \\tfrac12\\big(2 + k^2 - \\sqrt{(2+k^2)^2 - 4}\\big),

    clipped to at most a factor 10 per level; a remaining gap to ``beta_min`` smaller than
    a quarter step is merged into the last step. The same rule holds
    approximately for simulated-tempering level moves with near-optimal weights.

    Parameters
    ----------
    log_prob : callable, ``(B, d) -> (B,)``
    x0 : Tensor, shape (B, d)
        Starting states of the pilot chains (reused level to level).
    beta_min : float
        Hottest inverse temperature, in (0, 1).
    target_acceptance : float
        Target acceptance :math:`a^*` in (0, 1).
    n_steps : int
        Pilot RWMH steps per level (the first half is discarded).
    step_size : float
        RWMH scale at ``beta = 1``.
    max_levels : int
        Raise if more levels would be needed.
    seed : int, optional

    Returns
    -------
    Tensor, shape (L,)
        Increasing inverse temperatures, ``betas[0] == beta_min``, ``betas[-1] == 1``.
    """
    if not 0 < beta_min < 1:
        raise ValueError(f"beta_min must lie in (0, 1), got {beta_min}")
    if not 0 < target_acceptance < 1:
        raise ValueError(f"target_acceptance must lie in (0, 1), got {target_acceptance}")
    if n_steps < 4:
        raise ValueError(f"n_steps must be >= 4 to estimate a variance, got {n_steps}")
    if x0.ndim != 2 or x0.shape[0] < 2:
        raise ValueError("x0 must have shape (B, d) with B >= 2 pilot chains")
    gen = torch.Generator().manual_seed(0 if seed is None else seed)
    kernel = RWMH(step_size)
    c = 2.0 * float(erfcinv(target_acceptance))
    betas = [1.0]
    x = x0.detach().clone()
    while betas[-1] > beta_min:
        beta = betas[-1]
        lp = log_prob(x)
        vals = []
        for t in range(n_steps):
            s = kernel.step(
                x, log_prob, beta, generator=gen, step_size=step_size / math.sqrt(beta), lp=lp
            )
            x, lp = s.x, s.log_prob
            if t >= n_steps // 2:
                vals.append(lp)
        sigma = float(torch.stack(vals).std())
        if sigma > 0:
            k2 = (c / (sigma * beta)) ** 2
            nxt = beta * ((2 + k2) - math.sqrt((2 + k2) ** 2 - 4)) / 2
        else:
            nxt = 0.0
        nxt = max(nxt, beta / 10.0, beta_min)
        if nxt - beta_min < 0.25 * (beta - nxt):  # no sliver of a last step
            nxt = beta_min
        betas.append(nxt)
        if len(betas) > max_levels:
            raise ValueError(
                f"more than max_levels={max_levels} levels needed; raise max_levels, "
                "raise beta_min or lower target_acceptance"
            )
    return torch.tensor(betas[::-1], dtype=x0.dtype)
