"""Functional DSM and DSM + FP loss-and-gradient steps, optionally ``torch.compile``-d.

The eager trainer step is a chain of small autograd calls (forward, ``create_graph``
gradient for the score of an energy network, backward); on a CPU with a 3 x 92 MLP at
batch 128 most of its time is per-op overhead. :func:`make_dsm_step` and
:func:`make_dsm_fp_step` write the same losses with ``torch.func`` (``grad_and_value``
over the parameters, ``grad`` over the positions for an energy network) so that
``torch.compile`` sees one graph with no double backward. The FP step is the vectorised
two-probe estimator of :func:`~.losses.dsm_fp_loss`: the DSM score and both probes'
scores from one batched gradient (``5B`` rows), the time stencil from one batched
forward (``4B`` rows).

Measured in ``benchmarks/energy_diffusion_speed.py`` (``--compile``); compiling costs
CPU-seconds, so it only pays for long runs and is off by default (``TrainConfig.compile``).
If compiling fails at the first call, a warning is given and the same functional step
runs eagerly from then on.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, grad_and_value

from ..._util import CompiledOrEager
from .sde import SDE

__all__ = ["make_dsm_fp_step", "make_dsm_step"]


def _keys(target: nn.Module, params: list[torch.nn.Parameter]) -> list[str]:
    names = {id(p): n for n, p in target.named_parameters()}
    if any(id(p) not in names for p in params):
        raise ValueError("params must be parameters of target (from target.parameters())")
    return [names[id(p)] for p in params]


def _wrap(gv, keys, params, compile: bool, what: str):
    """``(*batch) -> (value, grads tuple)`` around ``gv(p, *batch) -> (grads dict, value)``."""

    def eager(*batch):
        p = {k: v.detach() for k, v in zip(keys, params, strict=True)}
        g, v = gv(p, *batch)
        return v, tuple(g[k] for k in keys)

    if not compile:
        return eager
    run = CompiledOrEager(gv, gv, f"the {what} step", "the eager step")

    def step(*batch):
        p = {k: v.detach() for k, v in zip(keys, params, strict=True)}
        g, v = run(p, *batch)
        return v, tuple(g[k] for k in keys)

    return step


def make_dsm_step(
    target: nn.Module, sde: SDE, params: list[torch.nn.Parameter], compile: bool = True
) -> Callable[..., tuple[torch.Tensor, tuple[torch.Tensor, ...]]]:
    """The DSM loss of :func:`~.losses.dsm_loss` and its gradient, as one function.

    Parameters
    ----------
    target : nn.Module
        An energy network (``conservative = True``: score ``-grad_x E``) or a score network.
    sde : SDE
    params : list of Parameter
        The trained parameters of ``target`` (others are held fixed).
    compile : bool
        ``torch.compile`` the step; if compiling fails at the first call, a warning is
        given and the eager functional step is used from then on.

    Returns
    -------
    callable ``(x0 (B, ...), t (B,), noise (B, ...), w (B,)) -> (loss, grads)``
        ``grads`` has one tensor per entry of ``params`` (same order).
    """
    keys = _keys(target, params)
    conservative = bool(getattr(target, "conservative", False))

    def score(p, x, t):
        if conservative:

            def energy(x_):
                return functional_call(target, p, (x_, t)).sum()

            return -grad(energy)(x)
        return functional_call(target, p, (x, t))

    def loss(p, x0, t, noise, w):
        xt, _ = sde.perturb(x0, t, noise)
        sig = sde.sigma(t).view(-1, *([1] * (x0.dim() - 1)))
        per = (noise + sig * score(p, xt, t)).pow(2).flatten(1).mean(1)
        return (per * w).mean()

    return _wrap(grad_and_value(loss), keys, params, compile, "DSM")


def make_dsm_fp_step(
    target: nn.Module,
    sde: SDE,
    params: list[torch.nn.Parameter],
    fp_weight: float,
    sigma: float = 1e-4,
    hs: float = 1e-3,
    hd: float = 5e-4,
    dim_offset: float | None = None,
    compile: bool = True,
) -> Callable[..., tuple[torch.Tensor, tuple[torch.Tensor, ...]]]:
    """``l_dsm + fp_weight * l_fp`` of :func:`~.losses.dsm_fp_loss` and its gradient.

    The probes are inputs (``xi``, drawn by the caller from the same generator, in the
    same order, as :func:`~.losses.dsm_fp_loss` draws them), so the step is a pure
    function of its arguments and equals the eager loss and gradients to rounding.

    Parameters
    ----------
    target : nn.Module
        An energy network (``conservative = True``).
    sde : SDE
    params : list of Parameter
        The trained parameters of ``target``.
    fp_weight : float
        Weight of the FP term (ScoreMD's ``beta``).
    sigma, hs, hd, dim_offset
        Probe scale, time stencil and residual offset ``c`` (``None``: ``D``), as in
        :func:`~.losses.fp_residual_probe`.
    compile : bool
        As in :func:`make_dsm_step`.

    Returns
    -------
    callable ``(x0, t, noise, w, xi) -> ((loss, l_dsm, l_fp), grads)``
        ``x0``, ``noise`` (B, ...), ``t``, ``w`` (B,), the probes ``xi`` (2, B, ...)
        (standard normal); the losses are scalars, ``grads`` has one tensor per entry
        of ``params``.
    """
    if not getattr(target, "conservative", False):
        raise ValueError("the FP term needs an energy network (conservative = True)")
    if sigma <= 0 or hs <= 0 or hd <= 0:
        raise ValueError("sigma, hs and hd must be > 0")
    if fp_weight < 0:
        raise ValueError(f"fp_weight must be >= 0, got {fp_weight}")
    keys = _keys(target, params)

    def loss(p, x0, t, noise, w, xi):
        P, B, D = xi.shape[0], x0.shape[0], x0[0].numel()
        c = float(D) if dim_offset is None else float(dim_offset)
        xt, _ = sde.perturb(x0, t, noise)
        a, g2 = sde.drift_coeff(t), sde.g2(t)
        v = sigma * xi
        xp, xm = xt + v, xt - v
        rows = torch.cat([xt[None], xp, xm]).flatten(0, 1)  # (2P + 1) B rows at t
        t_rows = t.repeat(2 * P + 1)

        def energy_sum(x_):
            e = functional_call(target, p, (x_, t_rows))
            return e.sum(), e

        gx, e = grad(energy_sum, has_aux=True)(rows)
        s = -gx
        s_lead, s = s[:B], s[B:].view(2, P, B, -1)
        e_t = functional_call(
            target,
            p,
            (
                torch.cat([xp, xp]).flatten(0, 1),
                torch.cat([(t + hd).repeat(P), (t - hs).repeat(P)]),
            ),
        )
        e = torch.cat([e[B:], e_t]).view(4, P, B)
        s_p, s_m = s[0], s[1]
        div = (xi.flatten(2) * (s_p - s_m)).sum(2) / (2 * sigma)
        xs = (xp.flatten(2) * s_p).sum(2)
        f0, f_fwd, f_bwd = -e[0], -e[2], -e[3]
        dt = (hs**2 * f_fwd + (hd**2 - hs**2) * f0 - hd**2 * f_bwd) / (hs * hd * (hd + hs))
        r = 0.5 * g2 * (div + s_p.pow(2).sum(2)) - a * xs - a * c - dt
        sig = sde.sigma(t).view(-1, *([1] * (x0.dim() - 1)))
        per = (noise + sig * s_lead.view_as(x0)).pow(2).flatten(1).mean(1)
        l_dsm = (per * w).mean()
        l_fp = (r[0] * r[1] * w).mean() / D**2
        tot = l_dsm + fp_weight * l_fp
        return tot, (tot, l_dsm, l_fp)

    gv = grad_and_value(loss, has_aux=True)

    def gv_flat(p, *batch):
        g, (_, aux) = gv(p, *batch)
        return g, aux

    return _wrap(gv_flat, keys, params, compile, "DSM + FP")
