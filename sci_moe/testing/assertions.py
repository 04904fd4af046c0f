"""Assertions for tests: fast MoE path vs the naive reference, outputs and gradients."""

from __future__ import annotations

import torch

from ..moe.layer import MoE
from ..moe.routing import Routing
from .reference import reference_moe_forward

__all__ = ["assert_moe_matches_reference", "default_tolerance"]

_TOL = {
    torch.float64: (1e-10, 1e-9),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (2e-2, 5e-2),
    torch.float16: (5e-3, 1e-2),
}


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(atol, rtol)`` used by :func:`assert_moe_matches_reference` for ``dtype``.

    float64 1e-10/1e-9, float32 1e-5/1e-4, float16 5e-3/1e-2, bfloat16 2e-2/5e-2
    (relative to the largest entry of each compared tensor, see the assertion).
    """
    return _TOL[dtype]


def assert_moe_matches_reference(
    moe: MoE,
    x: torch.Tensor | None = None,
    routing: Routing | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    num_tokens: int = 16,
) -> None:
    """Check ``moe(x)`` against :func:`~sci_moe.testing.reference_moe_forward`.

    Compares the output and the gradient of ``sum(y * g)`` (random ``g``) with respect to
    the input, the router weight and every other trainable parameter (each expert
    weight, shared experts, gates).

    Parameters
    ----------
    moe : MoE
    x : Tensor, shape (..., d_model), optional
        Random normal tokens of the layer's parameter dtype when omitted.
    routing : Routing, optional
        Fixed routing for both paths, detached (the router weight then gets no
        gradient). By default each path routes by itself; expert-choice and
        capacity-dropping selections come from the router, their weights are
        recomputed naively (see :func:`~sci_moe.testing.reference_routing`).
    atol, rtol : float, optional
        Default :func:`default_tolerance` of the dtype. The error of each tensor is
        measured as ``max|a - b| <= atol + rtol * max|b|``.
    num_tokens : int

    Raises
    ------
    AssertionError
        Naming the first tensor that differs and by how much.
    """
    param = next(moe.parameters())
    if x is None:
        x = torch.randn(num_tokens, moe.d_model, dtype=param.dtype, device=param.device)
    d_atol, d_rtol = default_tolerance(x.dtype)
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    if routing is not None:
        routing = routing.detach()
    params = [(n, p) for n, p in moe.named_parameters() if p.requires_grad]

    def run(fn):
        xi = x.detach().clone().requires_grad_(True)
        y = fn(xi)
        g = torch.Generator(device="cpu").manual_seed(1234)
        gy = torch.randn(y.shape, generator=g, dtype=torch.float64).to(y.dtype).to(y.device)
        grads = torch.autograd.grad(
            (y * gy).sum(), [xi] + [p for _, p in params], allow_unused=True
        )
        return y.detach(), grads

    y_fast, g_fast = run(lambda xi: moe(xi, routing=routing))
    y_ref, g_ref = run(lambda xi: reference_moe_forward(moe, xi, routing=routing))
    names = ["output", "grad[input]"] + [f"grad[{n}]" for n, _ in params]
    pairs = [(y_fast, y_ref), *zip(g_fast, g_ref, strict=True)]
    for name, (a, b) in zip(names, pairs, strict=True):
        if a is None and b is None:
            continue
        if a is None:
            a = torch.zeros_like(b)
        if b is None:
            b = torch.zeros_like(a)
        err = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        scale = b.double().abs().max().item() if b.numel() else 0.0
        if not err <= atol + rtol * scale:
            raise AssertionError(
                f"{name}: fast path differs from the naive reference by {err:.3e} "
                f"(allowed {atol:.1e} + {rtol:.1e} * {scale:.3e}) in {x.dtype}"
            )
