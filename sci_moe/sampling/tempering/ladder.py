"""Inverse-temperature ladders: geometric, and adapted to a target acceptance rate.

Ladders are increasing tensors ``betas`` of shape ``(L,)`` with ``betas[-1] == 1`` (the
target) and ``betas[0] == beta_min`` (the hottest level). Level 0 is the hottest.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from .kernels import RWMH, LogProb

__all__ = ["adaptive_ladder", "geometric_ladder", "swap_acceptance"]


def geometric_ladder(beta_min: float, n_levels: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """Geometric ladder :math:`\\beta_l = \\beta_{\\min}^{1 - l/(L-1)}`, ``l = 0..L-1``.

    Equivalent to OpenMM's :math:`T_k = T_{\\min}(T_{\\max}/T_{\\min})^{k/(n-1)}` read from the
    cold end.

    Parameters
    ----------
    beta_min : float
        Hottest inverse temperature, in (0, 1).
    n_levels : int
        Number of levels, an integer >= 2.
    dtype : torch.dtype, optional

    Returns
    -------
    Tensor, shape (n_levels,)
        Increasing inverse temperatures ending at 1.
    """
    if isinstance(beta_min, bool) or not isinstance(beta_min, (int, float)):
        raise ValueError(f"beta_min must be a number in (0, 1), got {beta_min!r}")
    if not 0 < beta_min < 1:
        raise ValueError(f"beta_min must lie in (0, 1), got {beta_min}")
    if isinstance(n_levels, bool) or not isinstance(n_levels, numbers.Integral):
        raise ValueError(
            f"n_levels must be an integer >= 2, got {n_levels!r}; pass e.g. round(n_levels)"
        )
    if n_levels < 2:
        raise ValueError(f"n_levels must be >= 2 (one hot and one target level), got {n_levels}")
    frac = torch.linspace(0, 1, int(n_levels), dtype=torch.float64)
    betas = torch.as_tensor(float(beta_min), dtype=torch.float64) ** (1 - frac)
    betas[-1] = 1.0
    return betas.to(dtype or torch.get_default_dtype())


def swap_acceptance(lp_a: Tensor, lp_b: Tensor, beta_a: float, beta_b: float) -> float:
    """Expected swap acceptance between two levels from samples of ``log_prob`` at each.

    The swap of :math:`x \\sim \\pi_{\\beta_a}` and :math:`y \\sim \\pi_{\\beta_b}` is accepted
    with :math:`\\min\\{1, \\exp((\\beta_a - \\beta_b)(\\log p(y) - \\log p(x)))\\}`; this is its
    mean over all pairs of the given samples.

    Parameters
    ----------
    lp_a, lp_b : Tensor, shape (n,) and (m,)
        Untempered ``log_prob`` of samples at ``beta_a`` and ``beta_b``.
    beta_a, beta_b : float

    Returns
    -------
    float
        Estimated acceptance in [0, 1].
    """
    d = (beta_a - beta_b) * (lp_b.reshape(1, -1) - lp_a.reshape(-1, 1))
    return float(torch.exp(d.clamp(max=0.0)).mean())


def _pilot(log_prob, x, beta, n_steps, step, gen):
    """RWMH at ``beta`` with the step adapted during the first half (discarded).

    Returns the final states, the pooled ``log_prob`` samples of the second half and the
    adapted step (at this ``beta``).
    """
    kernel = RWMH(step)
    lp = log_prob(x)
    vals = []
    acc_window = []
    for t in range(n_steps):
        s = kernel.step(x, log_prob, beta, generator=gen, step_size=step, lp=lp)
        x, lp = s.x, s.log_prob
        if t < n_steps // 2:
            # Robbins-Monro on the log step towards ~35% acceptance: a pilot started with a
            # step far too large (nothing accepted) or too small (nothing moves) unsticks.
            acc_window.append(float(s.accepted.double().mean()))
            if len(acc_window) == 10:
                step *= math.exp(2.0 * (sum(acc_window) / 10 - 0.35))
                acc_window = []
        else:
            vals.append(lp)
    return x, torch.stack(vals).reshape(-1), step


def adaptive_ladder(
    log_prob: LogProb,
    x0: Tensor,
    *,
    beta_min: float,
    target_acceptance: float = 0.4,
    n_steps: int = 400,
    step_size: float = 1.0,
    max_levels: int = 64,
    tolerance: float = 0.05,
    max_tries: int = 4,
    seed: int | None = None,
) -> Tensor:
    """Build a ladder from ``beta = 1`` downwards so neighbour swaps hit a target acceptance.

    At the current level a short batched RWMH pilot (step adapted during its discarded first
    half, so a pilot started stuck moves) samples :math:`\\log p(x)`. A first guess for the
    next level uses a Gaussian approximation of that distribution: a swap between
    :math:`\\beta` and :math:`\\beta' = r\\beta` is accepted with probability
    :math:`\\operatorname{erfc}(\\sqrt{m}/2)`, :math:`m = (\\beta-\\beta')^2\\sigma_\\beta
    \\sigma_{\\beta'}`, and with a constant heat capacity
    (:math:`\\sigma_{\\beta'} = \\sigma_\\beta\\beta/\\beta'`) the ratio solves
    :math:`(1-r)^2/r = k^2`, :math:`k = 2\\operatorname{erfc}^{-1}(a^*)/(\\sigma_\\beta\\beta)`.
    A pilot then runs at :math:`\\beta'` and the swap acceptance is *measured* from the two
    levels' samples (:func:`swap_acceptance`); while it is more than ``tolerance`` off the
    target the log step :math:`\\log(\\beta/\\beta')` is rescaled by
    :math:`\\operatorname{erfc}^{-1}(a^*)/\\operatorname{erfc}^{-1}(a)` (the Gaussian
    relation, exact in the small-step limit) and the pilot rerun, at most ``max_tries``
    times. Steps are at most a factor 10. The last step to ``beta_min`` may be shorter
    (easier) than the target; a remaining gap under a quarter of a step (in
    :math:`\\log\\beta`) is merged into it, and kept only if the merged step still meets
    the target within ``tolerance``.

    Parameters
    ----------
    log_prob : callable, ``(B, d) -> (B,)``
    x0 : Tensor, shape (B, d)
        Starting states of the pilot chains (carried level to level).
    beta_min : float
        Hottest inverse temperature, in (0, 1).
    target_acceptance : float
        Target swap acceptance :math:`a^*` in (0, 1).
    n_steps : int
        Pilot RWMH steps per level and try (the first half adapts the step and is discarded).
    step_size : float
        Initial RWMH step at ``beta = 1``.
    max_levels : int
        Raise if more levels would be needed.
    tolerance : float
        Accepted deviation of the measured swap acceptance from the target.
    max_tries : int
        Pilot runs per level at most (the last one is kept).
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
    if not bool(torch.isfinite(x0).all()):
        bad = torch.nonzero(~torch.isfinite(x0).all(1)).flatten().tolist()
        raise ValueError(f"x0 has non-finite entries in pilot chains {bad[:10]}; pass finite x0")
    if not 0 < tolerance < 1 or max_tries < 1:
        raise ValueError("tolerance must lie in (0, 1) and max_tries be >= 1")
    from scipy.special import erfcinv  # scipy.special: ~0.3 s at import, only here

    gen = torch.Generator().manual_seed(0 if seed is None else seed)
    z_target = float(erfcinv(target_acceptance))
    c = 2.0 * z_target
    log_min = math.log(beta_min)
    betas = [1.0]
    x, lp_cur, step = _pilot(log_prob, x0.detach().clone(), 1.0, n_steps, step_size, gen)
    while betas[-1] > beta_min:
        beta = betas[-1]
        sigma = float(lp_cur.std())
        if sigma > 0 and math.isfinite(sigma):
            k2 = (c / (sigma * beta)) ** 2
            r = ((2 + k2) - math.sqrt((2 + k2) ** 2 - 4)) / 2
            s = -math.log(max(r, 1e-300))
        else:
            s = math.log(10.0)
        s = min(max(s, 1e-6), math.log(10.0))
        for attempt in range(max_tries):
            log_nxt = math.log(beta) - s
            merged = log_nxt - log_min < 0.25 * s
            nxt = beta_min if merged else math.exp(log_nxt)
            x_new, lp_new, step_new = _pilot(
                log_prob, x, nxt, n_steps, step * math.sqrt(beta / nxt), gen
            )
            acc = swap_acceptance(lp_cur, lp_new, beta, nxt)
            short = acc >= target_acceptance and (merged or nxt == beta_min or s >= math.log(10))
            if abs(acc - target_acceptance) <= tolerance or short or attempt == max_tries - 1:
                break
            # rescale the log step with the Gaussian relation sqrt(m) ~ s
            z = float(erfcinv(min(max(acc, 1e-3), 1 - 1e-3)))
            s_used = math.log(beta / nxt)
            s = min(max(s_used * z_target / z, 1e-6), math.log(10.0))
        betas.append(nxt)
        x, lp_cur, step = x_new, lp_new, step_new
        if len(betas) > max_levels:
            raise ValueError(
                f"more than max_levels={max_levels} levels needed; raise max_levels, "
                "raise beta_min or lower target_acceptance"
            )
    return torch.tensor(betas[::-1], dtype=x0.dtype)
