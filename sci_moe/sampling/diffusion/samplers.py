"""i.i.d. samplers of a trained diffusion model: reverse SDE and probability-flow ODE.

Reverse-time SDE (Anderson 1982; Song et al. 2021), integrated from ``t = 1`` to ``t_end``
with Euler-Maruyama on a uniform grid (ScoreMD: 1000 steps, no final denoising):

.. math:: dx = [a(t)x - g(t)^2 s(x, t)]\\,dt + g(t)\\,d\\bar W

Probability-flow ODE :math:`dx/dt = a(t)x - \\tfrac12 g(t)^2 s(x, t)` (Euler or Heun).

Both work on preallocated state and noise buffers and evaluate the network (and the
update) in row chunks (``chunk_size``, default 4096): a 100k-sample batch of a 3 x 92 MLP
would allocate ~37 MB activations per layer and call, which the allocator maps and unmaps
every step (~1e5 minor page faults per step); chunks stay in the allocator's pools and
the cache. The rows are independent, so chunking changes nothing but BLAS rounding
(``benchmarks/energy_diffusion/speed.py`` measures it; the tests check the frames).
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


def _chunks(n: int, chunk_size: int | None) -> list[slice]:
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 or None, got {chunk_size}")
    c = n if chunk_size is None else min(n, chunk_size)
    return [slice(i, min(i + c, n)) for i in range(0, n, max(c, 1))]


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
    chunk_size: int | None = 4096,
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
    chunk_size : int or None
        Rows per network call and update (``None``: all at once). The noise of a step is
        drawn for the whole batch first, so the trajectories do not depend on it (up to
        BLAS rounding of the network).

    Returns
    -------
    Tensor, shape ``shape``; samples with non-finite values are kept (filter them with
    ``torch.isfinite(x).flatten(1).all(1)``, as ScoreMD drops NaN samples).
    """
    _check(n_steps, t_end)
    dtype = dtype or torch.get_default_dtype()
    x = sde.prior_sample(shape, generator, dtype=dtype) if x_init is None else x_init.clone()
    chunks = _chunks(shape[0], chunk_size)
    ts = torch.linspace(1.0, t_end, n_steps + 1, dtype=torch.float64).tolist()
    z = torch.empty_like(x)
    tv = torch.empty(chunks[0].stop - chunks[0].start, dtype=dtype)
    for i in progress_bar(range(n_steps), disable=not progress, desc="reverse SDE"):
        t, dt = ts[i], ts[i] - ts[i + 1]
        tv.fill_(t)
        a = _bcast(sde.drift_coeff(tv[:1]), x)
        g2 = _bcast(sde.g2(tv[:1]), x)
        noise_scale = (g2 * dt).sqrt()
        torch.randn(x.shape, generator=generator, dtype=dtype, out=z)
        for c in chunks:
            xc = x[c]
            drift = a * xc - g2 * _score(score_fn, xc, tv[: len(xc)])
            xc.copy_(xc - drift * dt + noise_scale * z[c])
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
    chunk_size: int | None = 4096,
) -> torch.Tensor:
    """Integrate the probability-flow ODE from a prior draw at ``t = 1`` to ``t_end``.

    Parameters
    ----------
    score_fn, sde, shape, n_steps, generator, x_init, dtype, progress, chunk_size
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
    chunks = _chunks(shape[0], chunk_size)
    ts = torch.linspace(1.0, t_end, n_steps + 1, dtype=torch.float64).tolist()
    tv = torch.empty(chunks[0].stop - chunks[0].start, dtype=dtype)

    def velocity(x, t):
        tv.fill_(t)
        a, g2 = _bcast(sde.drift_coeff(tv[:1]), x), _bcast(sde.g2(tv[:1]), x)
        return a * x - 0.5 * g2 * _score(score_fn, x, tv[: len(x)])

    for i in progress_bar(range(n_steps), disable=not progress, desc="probability flow"):
        t0, t1 = ts[i], ts[i + 1]
        h = t1 - t0  # negative
        for c in chunks:
            xc = x[c]
            k1 = velocity(xc, t0)
            if method == "euler":
                xc.copy_(xc + h * k1)
            else:
                k2 = velocity(xc + h * k1, t1)
                xc.copy_(xc + 0.5 * h * (k1 + k2))
    return x
