"""A functional DSM loss-and-gradient step, optionally ``torch.compile``-d.

The eager trainer step is a chain of small autograd calls (forward, ``create_graph``
gradient for the score of an energy network, backward); on a CPU with a 3 x 92 MLP at
batch 128 most of its time is per-op overhead. :func:`make_dsm_step` writes the same loss
with ``torch.func`` (``grad_and_value`` over the parameters, ``grad`` over the positions
for an energy network) so that ``torch.compile`` sees one graph with no double backward.

Measured (``benchmarks/energy_diffusion_speed.py``): the compiled plain step is ~2.7x
faster than the eager one, but compiling costs minutes of CPU under load, so it only pays
for long runs and is off by default (``TrainConfig.compile``). The FP term keeps the eager
path (its two-probe estimator is not written functionally yet).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, grad_and_value

from .sde import SDE

__all__ = ["make_dsm_step"]


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
    names = {id(p): n for n, p in target.named_parameters()}
    missing = [p for p in params if id(p) not in names]
    if missing:
        raise ValueError("params must be parameters of target (from target.parameters())")
    keys = [names[id(p)] for p in params]
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

    gv = grad_and_value(loss)

    def eager(x0, t, noise, w):
        p = {k: v.detach() for k, v in zip(keys, params, strict=True)}
        g, v = gv(p, x0, t, noise, w)
        return v, tuple(g[k] for k in keys)

    if not compile:
        return eager
    compiled = torch.compile(gv, dynamic=False)
    state = {"fn": None}

    def step(x0, t, noise, w):
        if state["fn"] is eager:
            return eager(x0, t, noise, w)
        p = {k: v.detach() for k, v in zip(keys, params, strict=True)}
        try:
            g, v = compiled(p, x0, t, noise, w)
        except Exception as err:  # any compiler failure falls back
            warnings.warn(
                f"torch.compile of the DSM step failed ({type(err).__name__}: {err}); "
                "using the eager step",
                RuntimeWarning,
                stacklevel=2,
            )
            state["fn"] = eager
            return eager(x0, t, noise, w)
        return v, tuple(g[k] for k in keys)

    return step
