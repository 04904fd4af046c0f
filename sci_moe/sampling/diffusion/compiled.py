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

Measured in ``benchmarks/energy_diffusion/speed.py`` (``--compile``); compiling costs
CPU-seconds, so it only pays for long runs and is off by default (``TrainConfig.compile``).
If compiling fails at the first call, a warning is given and the same functional step
runs eagerly from then on.

With ``optimizer=`` (an AdamW over the trained parameters) the step also holds the
update: gradient clipping, AdamW (Loshchilov & Hutter 2019, torch's non-amsgrad rule on
the optimiser's own state tensors, so its ``state_dict`` and a resume are unchanged) and
the EMA of the weights run in the same compiled graph, in place. That removes
``Optimizer.step``'s Python work and the per-step gradient hand-over, the rest of a
compiled plain step's overhead on this recipe.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, grad_and_value

from ..._util import CompiledOrEager
from .sde import SDE

__all__ = ["make_dsm_fp_step", "make_dsm_step"]

#: What ``optimizer=`` accepts: AdamW without amsgrad, maximize or differentiable.
_ADAMW_OFF = ("amsgrad", "maximize", "differentiable")


def _keys(target: nn.Module, params: list[torch.nn.Parameter]) -> list[str]:
    names = {id(p): n for n, p in target.named_parameters()}
    if any(id(p) not in names for p in params):
        raise ValueError("params must be parameters of target (from target.parameters())")
    return [names[id(p)] for p in params]


def _adamw_state(opt: torch.optim.Optimizer, params) -> tuple[float, float, float, float]:
    """Check ``opt`` is an AdamW over exactly ``params``; create its state tensors if absent.

    Returns (beta1, beta2, eps, weight_decay) of its one parameter group.
    """
    if not isinstance(opt, torch.optim.AdamW):
        raise ValueError(f"optimizer must be torch.optim.AdamW, got {type(opt).__name__}")
    if len(opt.param_groups) != 1:
        raise ValueError("optimizer must have one parameter group")
    group = opt.param_groups[0]
    if [id(p) for p in group["params"]] != [id(p) for p in params]:
        raise ValueError("optimizer must hold exactly params, in the same order")
    if any(group.get(k) for k in _ADAMW_OFF):
        raise ValueError(f"optimizer must not use {', '.join(_ADAMW_OFF)}")
    for q in params:
        if not opt.state.get(q):  # torch's own lazy initialisation (fused/foreach: same keys)
            opt.state[q] = {
                "step": torch.zeros((), dtype=torch.float32),
                "exp_avg": torch.zeros_like(q, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(q, memory_format=torch.preserve_format),
            }
    b1, b2 = group["betas"]
    return float(b1), float(b2), float(group["eps"]), float(group["weight_decay"])


def _wrap_update(gv, keys, params, opt, grad_clip, compile: bool, what: str):
    """``(*batch, lr, ema, decay) -> value``: ``gv`` then clip + AdamW + EMA, in place.

    ``gv(p, *batch) -> (grads dict, value)``; the update follows
    ``torch.optim.AdamW.step`` (decoupled decay ``p *= 1 - lr wd``; ``m``, ``v`` moving
    averages; bias corrections ``1 - beta^k``) and the trainer's EMA
    ``ema = lerp(ema, p, 1 - decay)``.
    """
    b1, b2, eps, wd = _adamw_state(opt, params)
    dtype = params[0].dtype

    def update(ps, ms, vs, ks, es, lr, decay, *batch):
        g, value = gv(dict(zip(keys, ps, strict=True)), *batch)
        for i, key in enumerate(keys):
            gr = g[key] if grad_clip is None else g[key].clamp(-grad_clip, grad_clip)
            p, m, v, k = ps[i], ms[i], vs[i], ks[i]
            k.add_(1)
            kk = k.to(dtype)
            p.mul_(1 - lr * wd)
            m.lerp_(gr, 1 - b1)
            v.mul_(b2).addcmul_(gr, gr, value=1 - b2)
            denom = v.sqrt() / (1 - b2**kk).sqrt() + eps
            p.sub_(lr / (1 - b1**kk) * m / denom)
            if es is not None:
                es[i].lerp_(p, 1 - decay)
        return value

    run = (
        CompiledOrEager(update, update, f"the {what} step", "the eager step") if compile else update
    )
    lr_t, decay_t = torch.zeros((), dtype=dtype), torch.zeros((), dtype=dtype)

    def step(*batch, lr: float, ema=None, decay: float = 0.0):
        st = [opt.state[q] for q in params]  # fresh: a load_state_dict replaces the tensors
        lr_t.fill_(lr)
        decay_t.fill_(decay)
        with torch.no_grad():
            return run(
                [q.detach() for q in params],
                [d["exp_avg"] for d in st],
                [d["exp_avg_sq"] for d in st],
                [d["step"] for d in st],
                ema,
                lr_t,
                decay_t,
                *batch,
            )

    return step


def _wrap(gv, keys, params, compile: bool, what: str, opt=None, grad_clip=None):
    """``(*batch) -> (value, grads tuple)`` around ``gv(p, *batch) -> (grads dict, value)``;
    with ``opt``: :func:`_wrap_update`."""
    if opt is not None:
        return _wrap_update(gv, keys, params, opt, grad_clip, compile, what)

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
    target: nn.Module,
    sde: SDE,
    params: list[torch.nn.Parameter],
    compile: bool = True,
    optimizer: torch.optim.Optimizer | None = None,
    grad_clip: float | None = None,
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
    optimizer : torch.optim.AdamW or None
        If given (an AdamW over exactly ``params``, one group, no amsgrad/maximize), the
        step also updates ``params`` in place: gradients clipped to ``+-grad_clip``
        (``clip_grad_value_``), AdamW with the optimiser's hyper-parameters on its own
        state tensors (created if absent), then the EMA.
    grad_clip : float or None
        With ``optimizer``: the gradient value clip (``None``: none).

    Returns
    -------
    callable ``(x0 (B, ...), t (B,), noise (B, ...), w (B,)) -> (loss, grads)``
        ``grads`` has one tensor per entry of ``params`` (same order). With
        ``optimizer``: ``(x0, t, noise, w, *, lr, ema=None, decay=0.0) -> loss``, which
        takes one AdamW step at learning rate ``lr`` and, if ``ema`` (tensors like
        ``params``) is given, sets ``ema = lerp(ema, params, 1 - decay)`` in place.
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

    return _wrap(grad_and_value(loss), keys, params, compile, "DSM", optimizer, grad_clip)


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
    optimizer: torch.optim.Optimizer | None = None,
    grad_clip: float | None = None,
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
    compile, optimizer, grad_clip
        As in :func:`make_dsm_step`.

    Returns
    -------
    callable ``(x0, t, noise, w, xi) -> ((loss, l_dsm, l_fp), grads)``
        ``x0``, ``noise`` (B, ...), ``t``, ``w`` (B,), the probes ``xi`` (2, B, ...)
        (standard normal); the losses are scalars, ``grads`` has one tensor per entry
        of ``params``. With ``optimizer``: ``(x0, t, noise, w, xi, *, lr, ema=None,
        decay=0.0) -> (loss, l_dsm, l_fp)`` and the update, as in :func:`make_dsm_step`.
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

    return _wrap(gv_flat, keys, params, compile, "DSM + FP", optimizer, grad_clip)
