"""i.i.d. samplers of a trained diffusion model: reverse SDE and probability-flow ODE.

Reverse-time SDE (Anderson 1982; Song et al. 2021), integrated from ``t = 1`` to ``t_end``
with Euler-Maruyama on a uniform grid (ScoreMD: 1000 steps, no final denoising):

.. math:: dx = [a(t)x - g(t)^2 s(x, t)]\\,dt + g(t)\\,d\\bar W

Probability-flow ODE :math:`dx/dt = a(t)x - \\tfrac12 g(t)^2 s(x, t)` (Euler or Heun).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..._util import progress_bar
from .sde import SDE, _bcast

__all__ = ["probability_flow_sample", "reverse_sde_sample"]

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check(n_steps: int, t_end: float) -> None:
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    if not 0 <= t_end < 1:
        raise ValueError(f"t_end must be in [0, 1), got {t_end}")


def _score(score_fn, x, t):
    s = score_fn(x, t)
    return s.detach()


def reverse_sde_sample(
    score_fn: ScoreFn,
    sde: SDE,
    shape: tuple[int, ...],
    n_steps: int = 1000,
    t_end: float = 0.0,
    generator: torch.Generator | None = None,
    x_init: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    progress: bool = False,
) -> torch.Tensor:
    """Euler-Maruyama on the reverse-time SDE.

    Parameters
    ----------
    score_fn : callable ``(x (B, ...), t (B,)) -> s (B, ...)``
        E.g. ``model.score``.
    sde : SDE
    shape : tuple of int
        ``(B, ...)`` of the samples.
    n_steps : int
        Uniform steps from ``t = 1`` to ``t_end``.
    t_end : float
        Final time (ScoreMD: 0; the score is evaluated at ``t > t_end`` only).
    generator : torch.Generator, optional
    x_init : Tensor, optional
        Start at ``t = 1`` (default: a prior draw).
    dtype : torch.dtype, optional
    progress : bool

    Returns
    -------
    Tensor, shape ``shape``; samples with non-finite values are kept (filter them with
    ``torch.isfinite(x).flatten(1).all(1)``, as ScoreMD drops NaN samples).
    """
    _check(n_steps, t_end)
    dtype = dtype or torch.get_default_dtype()
    x = sde.prior_sample(shape, generator, dtype=dtype) if x_init is None else x_init.clone()
    ts = torch.linspace(1.0, t_end, n_steps + 1, dtype=torch.float64)
    for i in progress_bar(range(n_steps), disable=not progress, desc="reverse SDE"):
        t, dt = ts[i].item(), (ts[i] - ts[i + 1]).item()
        tv = torch.full((shape[0],), t, dtype=dtype)
        a = _bcast(sde.drift_coeff(tv), x)
        g2 = _bcast(sde.g2(tv), x)
        drift = a * x - g2 * _score(score_fn, x, tv)
        z = torch.randn(x.shape, generator=generator, dtype=dtype)
        x = x - drift * dt + (g2 * dt).sqrt() * z
    return x


def probability_flow_sample(
    score_fn: ScoreFn,
    sde: SDE,
    shape: tuple[int, ...],
    n_steps: int = 500,
    t_end: float = 1e-3,
    method: str = "heun",
    generator: torch.Generator | None = None,
    x_init: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    progress: bool = False,
) -> torch.Tensor:
    """Integrate the probability-flow ODE from a prior draw at ``t = 1`` to ``t_end``.

    Parameters
    ----------
    score_fn, sde, shape, n_steps, generator, x_init, dtype, progress
        As in :func:`reverse_sde_sample`.
    t_end : float
        Final time (> 0 recommended: the score may be stiff at ``t = 0``).
    method : {"euler", "heun"}
        Heun = explicit trapezoidal (2nd order), one extra score call per step.

    Returns
    -------
    Tensor, shape ``shape``
    """
    _check(n_steps, t_end)
    if method not in ("euler", "heun"):
        raise ValueError(f"method must be 'euler' or 'heun', got {method!r}")
    dtype = dtype or torch.get_default_dtype()
    x = sde.prior_sample(shape, generator, dtype=dtype) if x_init is None else x_init.clone()
    ts = torch.linspace(1.0, t_end, n_steps + 1, dtype=torch.float64)

    def velocity(x, t):
        tv = torch.full((shape[0],), t, dtype=dtype)
        a, g2 = _bcast(sde.drift_coeff(tv), x), _bcast(sde.g2(tv), x)
        return a * x - 0.5 * g2 * _score(score_fn, x, tv)

    for i in progress_bar(range(n_steps), disable=not progress, desc="probability flow"):
        t0, t1 = ts[i].item(), ts[i + 1].item()
        h = t1 - t0  # negative
        k1 = velocity(x, t0)
        if method == "euler":
            x = x + h * k1
        else:
            k2 = velocity(x + h * k1, t1)
            x = x + 0.5 * h * (k1 + k2)
    return x
