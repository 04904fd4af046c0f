"""Denoising score matching and the Fokker-Planck (FP) residual regulariser of ScoreMD.

For a linear-drift SDE :math:`dx = a(t)x\\,dt + g(t)dW` the log-density of the marginals
obeys (``D`` = number of coordinates, :math:`s = \\nabla_x \\log p_t`)

.. math::

    \\partial_t \\log p_t = \\tfrac12 g^2\\,(\\nabla\\cdot s + \\lVert s\\rVert^2)
        - a\\,(x\\cdot s) - a D,

which for the VP SDE (:math:`a = -\\beta/2`, :math:`g^2 = \\beta`) is
:math:`\\tfrac12\\beta(\\nabla\\cdot s + \\lVert s\\rVert^2 + x\\cdot s + D)`. The residual
of an energy model :math:`\\log q_\\theta = -E_\\theta`, :math:`s_\\theta = -\\nabla E_\\theta`, is

.. math::

    r(x, t) = \\tfrac12 g^2(\\nabla\\cdot s_\\theta + \\lVert s_\\theta\\rVert^2)
        - a\\,x\\cdot s_\\theta - a\\,c - \\partial_t \\log q_\\theta,

with ``c = D`` (exact) or ``c = 1`` (ScoreMD's code; the difference is absorbed by a
time-dependent offset of the unnormalised energy, forces are unaffected). The two-probe
estimator (Plainer et al. 2025, Theorem 1) replaces the divergence by a central finite
difference along a random probe :math:`v = \\sigma\\xi` and evaluates all terms at
:math:`x + v`; the product of two independent probes is an unbiased estimate of
:math:`r^2` that needs only first derivatives of :math:`E_\\theta`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .networks import energy_and_score
from .sde import SDE, _bcast

__all__ = [
    "dsm_fp_loss",
    "dsm_loss",
    "fp_loss",
    "fp_residual_exact",
    "fp_residual_probe",
    "time_weight",
]

EnergyFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def time_weight(t: torch.Tensor, mid: float | None, t0: float, t1: float) -> torch.Tensor:
    """ScoreMD's ``equal_weight``: each side of ``mid`` gets half the total weight.

    .. math::

        w(t) = \\frac{t_1 - t_0}{2(\\mathrm{mid} - t_0)}\\ (t \\le \\mathrm{mid}),\\qquad
        \\frac{t_1 - t_0}{2(t_1 - \\mathrm{mid})}\\ (t > \\mathrm{mid})

    so that :math:`E_{t \\sim U[t_0, t_1]}[w] = 1`; a small ``mid`` up-weights small ``t``.
    ``mid=None`` gives ``w = 1``.

    Parameters
    ----------
    t : Tensor, shape (B,)
    mid, t0, t1 : float

    Returns
    -------
    Tensor, shape (B,)
    """
    if mid is None:
        return torch.ones_like(t)
    if not t0 < mid < t1:
        raise ValueError(f"mid must lie strictly inside ({t0}, {t1}), got {mid}")
    lo = (t1 - t0) / (2 * (mid - t0))
    hi = (t1 - t0) / (2 * (t1 - mid))
    return torch.where(t <= mid, torch.full_like(t, lo), torch.full_like(t, hi))


def dsm_loss(
    score_fn: Callable[..., torch.Tensor],
    sde: SDE,
    x0: torch.Tensor,
    t: torch.Tensor,
    noise: torch.Tensor,
    weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Denoising score matching loss (ScoreMD ``get_loss``, no likelihood weighting).

    .. math::

        L = \\mathrm{mean}_b\\, w(t_b)\\,
            \\mathrm{mean}_d(\\varepsilon + \\sigma_t s_\\theta(x_t, t))^2

    Parameters
    ----------
    score_fn : callable ``(x, t, create_graph) -> s``
        E.g. ``model.score``.
    sde : SDE
    x0 : Tensor, shape (B, ...)
        Clean samples.
    t : Tensor, shape (B,)
    noise : Tensor, shape (B, ...)
        Standard normal ``eps``.
    weight : Tensor, shape (B,), optional
        Time weights ``w(t)``.

    Returns
    -------
    loss : Tensor, scalar
    x_t : Tensor, shape (B, ...)
        The perturbed samples (reused by the FP term).
    """
    xt, _ = sde.perturb(x0, t, noise)
    sig = _bcast(sde.sigma(t), x0)
    s = score_fn(xt, t, create_graph=True)
    per = (noise + sig * s).pow(2).flatten(1).mean(1)
    if weight is not None:
        per = per * weight
    return per.mean(), xt


def _offset(c: float | None, d: int) -> float:
    return float(d) if c is None else float(c)


def fp_residual_exact(
    energy_fn: EnergyFn,
    sde: SDE,
    x: torch.Tensor,
    t: torch.Tensor,
    dim_offset: float | None = None,
    create_graph: bool = False,
) -> torch.Tensor:
    """Exact FP residual ``r(x, t)`` by autograd (divergence by ``D`` backward passes).

    Parameters
    ----------
    energy_fn : callable ``(x (B, ...), t (B,)) -> E (B,)``
        Energy in units of kT, :math:`\\log q = -E`.
    sde : SDE
    x : Tensor, shape (B, ...)
    t : Tensor, shape (B,)
    dim_offset : float, optional
        ``c`` in the residual; ``None`` means the exact ``D``, ``1`` reproduces ScoreMD's code.
    create_graph : bool
        Keep the graph (to train on the exact residual; costly for large ``D``).

    Returns
    -------
    Tensor, shape (B,)
    """
    D = x[0].numel()
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        tg = t.detach().requires_grad_(True)
        e = energy_fn(xg, tg)
        gx, gt = torch.autograd.grad(e.sum(), (xg, tg), create_graph=True)
        s = -gx
        sf = s.flatten(1)
        div = torch.zeros_like(e)
        for i in range(D):
            (h,) = torch.autograd.grad(
                sf[:, i].sum(), xg, create_graph=create_graph, retain_graph=True
            )
            div = div + h.flatten(1)[:, i]
    a, g2 = sde.drift_coeff(t), sde.g2(t)
    xs = (xg.flatten(1) * sf).sum(1)
    r = 0.5 * g2 * (div + sf.pow(2).sum(1)) - a * xs - a * _offset(dim_offset, D) + gt
    return r if create_graph else r.detach()


def _probe(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """A standard normal probe shaped like ``x``, on ``x``'s device: drawn on the
    generator's device (the CPU's for a CPU generator) and moved."""
    if generator is None:
        return torch.randn(x.shape, dtype=x.dtype, device=x.device)
    return torch.randn(x.shape, generator=generator, dtype=x.dtype, device=generator.device).to(
        x.device
    )


def fp_residual_probe(
    energy_fn: EnergyFn,
    sde: SDE,
    x: torch.Tensor,
    t: torch.Tensor,
    n_probes: int = 2,
    sigma: float = 1e-4,
    hs: float = 1e-3,
    hd: float = 5e-4,
    dim_offset: float | None = None,
    create_graph: bool = True,
    generator: torch.Generator | None = None,
    batched: bool = True,
) -> torch.Tensor:
    """First-order probe estimates :math:`\\tilde R(x, t; v)` of the FP residual.

    For each probe :math:`v = \\sigma\\xi`, :math:`\\xi \\sim N(0, I)`:

    .. math::

        \\tilde R = \\tfrac12 g^2\\,\\xi\\cdot\\frac{s(x+v) - s(x-v)}{2\\sigma}
            + \\tfrac12 g^2\\lVert s(x+v)\\rVert^2 - a\\,(x+v)\\cdot s(x+v) - a\\,c
            - \\partial_t \\log q(x+v, t)

    with :math:`\\partial_t f \\approx [h_s^2 f(t+h_d) + (h_d^2-h_s^2)f(t) - h_d^2 f(t-h_s)]
    / (h_s h_d (h_d+h_s))`. Independent probes are independent given ``(x, t)``, so
    ``R[0] * R[1]`` estimates :math:`r^2` without bias (up to :math:`O(\\sigma^2, h^2)`).

    Parameters
    ----------
    energy_fn, sde, x, t, dim_offset
        As in :func:`fp_residual_exact`.
    n_probes : int
        Independent probes (2 for the product estimator).
    sigma : float
        Probe scale (ScoreMD 1e-4; works in float32 at O(1) data scale).
    hs, hd : float
        Backward and forward time steps of the stencil (ScoreMD 1e-3, 5e-4).
    create_graph : bool
        Keep the graph for training.
    generator : torch.Generator, optional
        Source of the probes (drawn on the generator's device, e.g. a CPU generator for
        ``x`` on a GPU, and moved to ``x``'s: the same probes on every device).
    batched : bool
        Evaluate every probe's ``x + v``, ``x - v`` and both stencil times in ONE network
        forward over a ``4 n_probes B`` batch and ONE (double-backward-able) gradient
        (default). ``False`` is the reference loop: ``4 n_probes`` separate calls and
        ``2 n_probes`` gradients. Both draw the same probes in the same order and compute
        the same residual (equal to rounding: BLAS may sum a larger batch differently).

    Returns
    -------
    Tensor, shape (n_probes, B)
    """
    if sigma <= 0 or hs <= 0 or hd <= 0:
        raise ValueError("sigma, hs and hd must be > 0")
    D = x[0].numel()
    a, g2 = sde.drift_coeff(t), sde.g2(t)
    c = _offset(dim_offset, D)
    x = x.detach()
    if batched:
        return _probe_batched(
            energy_fn, x, t, a, g2, c, n_probes, sigma, hs, hd, create_graph, generator
        )
    out = []
    for _ in range(n_probes):
        xi = _probe(x, generator)
        v = sigma * xi
        e_p, s_p = energy_and_score(energy_fn, x + v, t, create_graph=create_graph)
        _, s_m = energy_and_score(energy_fn, x - v, t, create_graph=create_graph)
        div = (xi * (s_p - s_m)).flatten(1).sum(1) / (2 * sigma)
        sp = s_p.flatten(1)
        xs = ((x + v).flatten(1) * sp).sum(1)
        f0 = -e_p
        f_fwd = -energy_fn(x + v, t + hd)
        f_bwd = -energy_fn(x + v, t - hs)
        dt = (hs**2 * f_fwd + (hd**2 - hs**2) * f0 - hd**2 * f_bwd) / (hs * hd * (hd + hs))
        r = 0.5 * g2 * (div + sp.pow(2).sum(1)) - a * xs - a * c - dt
        out.append(r)
    return torch.stack(out)


def _probe_batched(
    energy_fn, x, t, a, g2, c, n_probes, sigma, hs, hd, create_graph, generator, lead=None
):
    """:func:`fp_residual_probe` with two batched network calls for all probes.

    Rows (each block ``B`` long), for probes ``k = 0 .. P-1``: ``x + v_k`` and ``x - v_k``
    at ``t`` (``2P`` blocks, one forward + one create_graph gradient: the scores and
    ``f0``), then ``x + v_k`` at ``t + hd`` and at ``t - hs`` (``2P`` blocks, one plain
    forward). Stacking all ``4P`` blocks into the gradient call instead costs more: their
    rows would go through the double backward for nothing (measured, 2 cores).

    ``lead`` (shape of ``x``, optional): extra rows at ``t`` put first into the gradient
    call; then ``(R, e_lead, s_lead)`` is returned instead of ``R``.
    """
    P, B = n_probes, x.shape[0]
    # the probes in the reference loop's order (nothing else draws in between)
    xi = torch.stack([_probe(x, generator) for _ in range(P)])  # (P, B, ...)
    v = sigma * xi
    xp, xm = x + v, x - v
    # scores at x +- v: one forward + one gradient over 2 P B rows
    with torch.enable_grad():
        rows = [xp, xm] if lead is None else [lead.detach()[None], xp, xm]
        L = 0 if lead is None else 1  # blocks of lead rows
        xg = torch.cat(rows).flatten(0, 1).detach().requires_grad_(True)
        e = energy_fn(xg, t.repeat(2 * P + L))
        (gx,) = torch.autograd.grad(e.sum(), xg, create_graph=create_graph)
    if lead is not None:
        e_lead, s_lead = e[:B], -gx[:B]
        e, gx = e[B:], gx[B:]
    # the time stencil at x + v: one forward over 2 P B rows (no x-gradient needed, so
    # its rows stay out of the double backward)
    e_t = energy_fn(
        torch.cat([xp, xp]).flatten(0, 1), torch.cat([(t + hd).repeat(P), (t - hs).repeat(P)])
    )
    e = torch.cat([e, e_t]).view(4, P, B)
    s = -gx.view(2, P, B, -1)
    s_p, s_m = s[0], s[1]  # (P, B, D)
    div = (xi.flatten(2) * (s_p - s_m)).sum(2) / (2 * sigma)
    xs = (xp.flatten(2) * s_p).sum(2)
    f0, f_fwd, f_bwd = -e[0], -e[2], -e[3]
    dt = (hs**2 * f_fwd + (hd**2 - hs**2) * f0 - hd**2 * f_bwd) / (hs * hd * (hd + hs))
    r = 0.5 * g2 * (div + s_p.pow(2).sum(2)) - a * xs - a * c - dt
    return r if lead is None else (r, e_lead, s_lead)


def dsm_fp_loss(
    energy_fn: EnergyFn,
    sde: SDE,
    x0: torch.Tensor,
    t: torch.Tensor,
    noise: torch.Tensor,
    weight: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    sigma: float = 1e-4,
    hs: float = 1e-3,
    hd: float = 5e-4,
    dim_offset: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`dsm_loss` and :func:`fp_loss` of an energy model from two network calls.

    The DSM score at ``x_t`` joins the probes' scores in one forward + one gradient
    (``5B`` rows), the time stencil is a second forward (``4B`` rows). The probes are
    drawn from ``generator`` after ``noise`` as in the separate calls, and both losses
    equal theirs (to rounding).

    Parameters
    ----------
    energy_fn : callable ``(x, t) -> E (B,)``
        An energy network; its score is :math:`-\nabla_x E`.
    sde, x0, t, noise, weight
        As in :func:`dsm_loss`.
    generator, sigma, hs, hd, dim_offset
        As in :func:`fp_loss`.

    Returns
    -------
    l_dsm, l_fp : Tensor, scalar
    """
    if sigma <= 0 or hs <= 0 or hd <= 0:
        raise ValueError("sigma, hs and hd must be > 0")
    D = x0[0].numel()
    xt, _ = sde.perturb(x0, t, noise)
    a, g2 = sde.drift_coeff(t), sde.g2(t)
    r, _, s = _probe_batched(
        energy_fn,
        xt.detach(),
        t,
        a,
        g2,
        _offset(dim_offset, D),
        2,
        sigma,
        hs,
        hd,
        True,
        generator,
        lead=xt,
    )
    sig = _bcast(sde.sigma(t), x0)
    per = (noise + sig * s).pow(2).flatten(1).mean(1)
    fp = r[0] * r[1]
    if weight is not None:
        per, fp = per * weight, fp * weight
    return per.mean(), fp.mean() / D**2


def fp_loss(
    energy_fn: EnergyFn,
    sde: SDE,
    x: torch.Tensor,
    t: torch.Tensor,
    weight: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    **probe_kw,
) -> torch.Tensor:
    """ScoreMD's FP regulariser ``mean_b[w(t) R1 R2] / D^2`` (two-probe estimator).

    Parameters
    ----------
    energy_fn, sde, x, t
        As in :func:`fp_residual_probe` (``x`` are the perturbed samples ``x_t``).
    weight : Tensor, shape (B,), optional
        Time weights.
    generator : torch.Generator, optional
    **probe_kw
        ``sigma``, ``hs``, ``hd``, ``dim_offset``, ``batched`` of :func:`fp_residual_probe`.

    Returns
    -------
    Tensor, scalar (can be negative: it is an unbiased estimate of a square)
    """
    D = x[0].numel()
    r = fp_residual_probe(energy_fn, sde, x, t, n_probes=2, generator=generator, **probe_kw)
    per = r[0] * r[1]
    if weight is not None:
        per = per * weight
    return per.mean() / D**2
