"""Batched local MCMC kernels (RWMH, MALA) over many chains at once.

A target is a log-density callable ``log_prob(x) -> Tensor`` with ``x`` of shape ``(B, d)``
and output of shape ``(B,)`` (unnormalised). A kernel samples the *tempered* target

.. math:: \\pi_\\beta(x) \\propto \\exp(\\beta \\log p(x)),

with an inverse temperature ``beta`` and a step size that may differ per chain. Kernels
return the new state, its **untempered** ``log_prob`` (the quantity level moves need) and
a per-chain acceptance mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch
from torch import Tensor

from ..._util import progress_bar

__all__ = ["MALA", "RWMH", "KernelStep", "LogProb", "as_batch", "sample"]

LogProb = Callable[[Tensor], Tensor]


@dataclass
class KernelStep:
    """Outcome of one batched kernel step.

    Attributes
    ----------
    x : Tensor, shape (B, d)
        New states.
    log_prob : Tensor, shape (B,)
        Untempered ``log_prob(x)`` at the new states.
    accepted : Tensor, shape (B,), bool
        Whether each chain's proposal was accepted.
    velocities : Tensor, shape (B, d), optional
        Velocities after the step (dynamics kernels such as :class:`~.langevin.BAOAB`).
    grad : Tensor, shape (B, d), optional
        Gradient of the untempered ``log_prob`` at ``x`` (cached by gradient kernels).
    """

    x: Tensor
    log_prob: Tensor
    accepted: Tensor
    velocities: Tensor | None = None
    grad: Tensor | None = None


class _Kernel(Protocol):
    """What :func:`sample` calls: :class:`RWMH`, :class:`MALA` or :class:`~.langevin.BAOAB`."""

    def step(
        self,
        x: Tensor,
        log_prob: LogProb,
        beta: float | Tensor = 1.0,
        *,
        generator: torch.Generator | None = None,
        lp: Tensor | None = None,
    ) -> KernelStep: ...


def as_batch(value: float | Tensor, batch: int, like: Tensor) -> Tensor:
    """Broadcast a scalar or ``(B,)`` tensor to shape ``(B,)`` with ``like``'s dtype/device."""
    t = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if t.ndim == 0:
        return t.expand(batch)
    if t.shape != (batch,):
        raise ValueError(f"expected a scalar or a tensor of shape ({batch},), got {tuple(t.shape)}")
    return t


def _check_x(x: Tensor) -> None:
    if x.ndim != 2:
        raise ValueError(f"x must have shape (B, d), got {tuple(x.shape)}; use x[:, None] for 1-D")


@dataclass
class RWMH:
    """Random-walk Metropolis-Hastings with Gaussian proposals.

    Proposal :math:`y = x + h\\,\\xi`, :math:`\\xi \\sim N(0, I)`, accepted with probability
    :math:`\\min\\{1, \\exp(\\beta(\\log p(y) - \\log p(x)))\\}`.

    Parameters
    ----------
    step_size : float
        Default proposal scale ``h`` (used when ``step`` gets no per-chain step size).
    """

    step_size: float = 1.0

    uses_velocities: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not (self.step_size > 0 and math.isfinite(self.step_size)):
            raise ValueError(f"step_size must be a positive finite float, got {self.step_size}")

    def step(
        self,
        x: Tensor,
        log_prob: LogProb,
        beta: float | Tensor = 1.0,
        *,
        generator: torch.Generator | None = None,
        step_size: float | Tensor | None = None,
        lp: Tensor | None = None,
    ) -> KernelStep:
        """One step for every chain.

        Parameters
        ----------
        x : Tensor, shape (B, d)
        log_prob : callable, ``(B, d) -> (B,)``
        beta : float or Tensor, shape (B,)
            Inverse temperature per chain.
        generator : torch.Generator, optional
        step_size : float or Tensor, shape (B,), optional
            Per-chain proposal scale; defaults to ``self.step_size``.
        lp : Tensor, shape (B,), optional
            Cached ``log_prob(x)`` (saves one evaluation).
        """
        _check_x(x)
        b = x.shape[0]
        beta_t = as_batch(beta, b, x)
        h = as_batch(self.step_size if step_size is None else step_size, b, x)
        lp_x = log_prob(x) if lp is None else lp
        y = x + h[:, None] * torch.randn(x.shape, generator=generator, dtype=x.dtype)
        lp_y = log_prob(y)
        log_u = torch.rand(b, generator=generator, dtype=x.dtype).log()
        acc = log_u < beta_t * (lp_y - lp_x)
        return KernelStep(torch.where(acc[:, None], y, x), torch.where(acc, lp_y, lp_x), acc)


def _lp_grad(log_prob: LogProb, x: Tensor) -> tuple[Tensor, Tensor]:
    with torch.enable_grad():
        xr = x.detach().requires_grad_(True)
        lp = log_prob(xr)
        (g,) = torch.autograd.grad(lp.sum(), xr)
    return lp.detach(), g.detach()


@dataclass
class MALA(RWMH):
    """Metropolis-adjusted Langevin algorithm on the tempered target.

    Proposal :math:`y = x + \\tfrac{h^2}{2}\\beta\\nabla\\log p(x) + h\\xi`, accepted with the
    Metropolis-Hastings ratio including the Gaussian proposal densities
    :math:`q(x|y)/q(y|x)`. Gradients come from autograd, so ``log_prob`` must be
    differentiable in torch.
    """

    def step(
        self,
        x: Tensor,
        log_prob: LogProb,
        beta: float | Tensor = 1.0,
        *,
        generator: torch.Generator | None = None,
        step_size: float | Tensor | None = None,
        lp: Tensor | None = None,
    ) -> KernelStep:
        """One MALA step for every chain (same arguments as :meth:`RWMH.step`)."""
        _check_x(x)
        b = x.shape[0]
        beta_t = as_batch(beta, b, x)[:, None]
        h = as_batch(self.step_size if step_size is None else step_size, b, x)[:, None]
        lp_x, g_x = _lp_grad(log_prob, x)
        mean_x = x + 0.5 * h**2 * beta_t * g_x
        y = mean_x + h * torch.randn(x.shape, generator=generator, dtype=x.dtype)
        lp_y, g_y = _lp_grad(log_prob, y)
        mean_y = y + 0.5 * h**2 * beta_t * g_y
        log_q_fwd = -((y - mean_x) ** 2).sum(-1) / (2 * h[:, 0] ** 2)
        log_q_bwd = -((x - mean_y) ** 2).sum(-1) / (2 * h[:, 0] ** 2)
        log_alpha = beta_t[:, 0] * (lp_y - lp_x) + log_q_bwd - log_q_fwd
        log_u = torch.rand(b, generator=generator, dtype=x.dtype).log()
        acc = log_u < log_alpha
        return KernelStep(torch.where(acc[:, None], y, x), torch.where(acc, lp_y, lp_x), acc)


def sample(
    kernel: _Kernel,
    log_prob: LogProb,
    x0: Tensor,
    n_steps: int,
    *,
    beta: float | Tensor = 1.0,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    progress: bool | None = None,
) -> tuple[Tensor, Tensor]:
    """Run ``n_steps`` of a kernel on all chains (the plain, untempered baseline).

    ``kernel`` is :class:`RWMH`, :class:`MALA` or :class:`~.langevin.BAOAB` (plain
    Langevin dynamics at temperature ``1/beta``; its acceptance is reported as 1).

    Returns
    -------
    samples : Tensor, shape (n_steps, B, d)
    acceptance : Tensor, shape (B,)
        Fraction of accepted proposals per chain.
    """
    _check_x(x0)
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
    x = x0.detach().clone()
    lp = log_prob(x).detach()
    out = torch.empty((n_steps, *x.shape), dtype=x.dtype)
    acc = torch.zeros(x.shape[0], dtype=x.dtype)
    dynamics = bool(getattr(kernel, "uses_velocities", False))
    v = g = None
    if dynamics:
        v = kernel.init_velocities(x, beta, generator)
    for t in progress_bar(
        range(n_steps), disable=None if progress is None else not progress, desc="mcmc", leave=False
    ):
        if dynamics:
            s = kernel.step(x, log_prob, beta, generator=generator, lp=lp, velocities=v, grad=g)
            v, g = s.velocities, s.grad
        else:
            s = kernel.step(x, log_prob, beta, generator=generator, lp=lp)
        x, lp = s.x, s.log_prob
        acc += s.accepted
        out[t] = x
    return out, acc / n_steps
