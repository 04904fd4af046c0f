"""Assertions for tests: fast MoE path vs the naive reference, outputs and gradients."""

from __future__ import annotations

import torch
from torch import nn

from ..moe import ExpertBank, MoE, RoutedModule, Router, Routing, dispatch
from .reference import reference_moe_forward, reference_routed_forward

__all__ = [
    "assert_moe_matches_reference",
    "assert_routed_bank_matches_reference",
    "assert_routed_module",
    "default_tolerance",
]

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
    if routing is not None:
        routing = routing.detach()
    params = [(n, p) for n, p in moe.named_parameters() if p.requires_grad]
    _compare(
        lambda xi, _: moe(xi, routing=routing),
        lambda xi, _: reference_moe_forward(moe, xi, routing=routing),
        x,
        None,
        params,
        atol,
        rtol,
    )


def assert_routed_bank_matches_reference(
    router: Router | None,
    experts: ExpertBank,
    x: torch.Tensor | None = None,
    routing: Routing | None = None,
    *,
    router_input: torch.Tensor | None = None,
    shared: nn.Module | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    num_tokens: int = 16,
) -> None:
    """Check a (router, expert bank) pair without an :class:`~sci_moe.moe.MoE`.

    The fast path is ``dispatch(x, router(router_input), experts) + shared(x)``
    (:func:`~sci_moe.moe.dispatch`: sort, grouped GEMM, combine, plus the bank's base
    term); the reference is :func:`~sci_moe.testing.reference_routed_forward` with the
    routing recomputed token by token (:func:`~sci_moe.testing.reference_routing`).
    Compares the output and the gradients of ``sum(y * g)`` with respect to ``x``,
    ``router_input`` and every trainable parameter of the router, the bank and
    ``shared``.

    Parameters
    ----------
    router : Router or None
        ``None`` needs ``routing``.
    experts : ExpertBank
    x : Tensor, shape (T, d_in), optional
        What the experts read; random normal tokens of the bank's dtype when omitted.
    routing : Routing, optional
        Fixed routing for both paths, detached (the router then gets no gradient).
    router_input : Tensor, shape (T, d_router), optional
        What the router reads, if not ``x`` (SPiCE's vector router reads Gram features).
    shared : nn.Module, optional
        An always-on module added to both paths.
    atol, rtol : float, optional
        Default :func:`default_tolerance` of the dtype (see
        :func:`assert_moe_matches_reference`).
    num_tokens : int

    Raises
    ------
    AssertionError
        Naming the first tensor that differs and by how much.
    """
    param = next(experts.parameters())
    if x is None:
        x = torch.randn(num_tokens, experts.d_in, dtype=param.dtype, device=param.device)
    if routing is None and router is None:
        raise ValueError("give a router or a routing")
    if routing is not None:
        routing = routing.detach()
    modules = [("router", router), ("experts", experts), ("shared", shared)]
    params, seen = [], set()
    for prefix, m in modules:
        if m is None:
            continue
        for n, p in m.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append((f"{prefix}.{n}", p))

    def fast(xi, ri):
        r = routing if routing is not None else router(xi if ri is None else ri)
        y = dispatch(xi, r, experts)
        return y if shared is None else y + shared(xi)

    def ref(xi, ri):
        return reference_routed_forward(
            router, experts, xi, routing=routing, shared=shared, router_input=ri
        )

    _compare(fast, ref, x, router_input, params, atol, rtol)


def _compare(fast, ref, x, router_input, params, atol, rtol) -> None:
    d_atol, d_rtol = default_tolerance(x.dtype)
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    extra = [] if router_input is None else [router_input]

    def run(fn):
        xi = x.detach().clone().requires_grad_(True)
        ri = None
        if router_input is not None:
            ri = router_input.detach().clone().requires_grad_(True)
        y = fn(xi, ri)
        g = torch.Generator(device="cpu").manual_seed(1234)
        gy = torch.randn(y.shape, generator=g, dtype=torch.float64).to(y.dtype).to(y.device)
        wrt = [xi] + ([ri] if ri is not None else []) + [p for _, p in params]
        grads = torch.autograd.grad((y * gy).sum(), wrt, allow_unused=True)
        return y.detach(), grads

    y_fast, g_fast = run(fast)
    y_ref, g_ref = run(ref)
    names = ["output", "grad[input]"] + ["grad[router_input]"] * len(extra)
    names += [f"grad[{n}]" for n, _ in params]
    pairs = [(y_fast, y_ref), *zip(g_fast, g_ref, strict=True)]
    for name, (a, b) in zip(names, pairs, strict=True):
        _check_close(name, a, b, atol, rtol, x.dtype)


def _check_close(name, a, b, atol, rtol, dtype) -> None:
    if a is None and b is None:
        return
    if a is None:
        a = torch.zeros_like(b)
    if b is None:
        b = torch.zeros_like(a)
    if a.shape != b.shape:
        raise AssertionError(
            f"{name}: fast path has shape {tuple(a.shape)}, the naive reference {tuple(b.shape)}"
        )
    err = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    scale = b.double().abs().max().item() if b.numel() else 0.0
    if not err <= atol + rtol * scale:
        raise AssertionError(
            f"{name}: fast path differs from the naive reference by {err:.3e} "
            f"(allowed {atol:.1e} + {rtol:.1e} * {scale:.3e}) in {dtype}"
        )


def assert_routed_module(
    model: nn.Module,
    *inputs,
    atol: float | None = None,
    rtol: float | None = None,
    **kwargs,
) -> int:
    """Check every :class:`~sci_moe.moe.RoutedModule` call of a model against the naive loop.

    Runs ``model(*inputs, **kwargs)`` once (floating-point tensor inputs are cloned
    with ``requires_grad``) and records, for each call of each
    :class:`~sci_moe.moe.RoutedModule` inside ``model`` (``model`` itself included),
    the input ``x``, the routing the call used and its output ``y``. Each call is then
    compared with :func:`~sci_moe.testing.reference_routed_forward` on the same ``x``
    and routing: the per-token loop
    ``y_t = sum_j w_tj E_{i_tj}(x_t) + base(x_t) + shared(x_t)`` over the module's
    ``experts`` (a bank's ``forward_expert`` or expert module ``e``) and ``shared``.
    Compared: the output, and the gradients of ``sum(y * g)`` (random ``g``) with respect
    to ``x`` (when it carries a gradient; through the routing weights too), the
    routing weights and every trainable parameter of the module (router, experts,
    shared). The routing itself is taken from the call, so any router mode and any
    :meth:`~sci_moe.moe.RoutedModule.route` override are covered; what is checked is
    that :meth:`~sci_moe.moe.RoutedModule.run_experts`, the shared term and the reshape
    do what the routing says.

    Nothing is run twice and no module state changes beyond the one forward. Terms
    outside the routed sum (Default MoE's EMA outputs) are not part of the reference:
    check such layers with :func:`assert_moe_matches_reference`. Use eval mode for
    experts with dropout.

    Parameters
    ----------
    model : nn.Module
        Holds at least one :class:`~sci_moe.moe.RoutedModule`.
    *inputs, **kwargs
        The model's call arguments.
    atol, rtol : float, optional
        Default :func:`default_tolerance` of each call's input dtype (see
        :func:`assert_moe_matches_reference`).

    Returns
    -------
    int
        Number of routed calls checked.

    Raises
    ------
    AssertionError
        Naming the module, call, and first tensor that differs; or if no routed call ran.
    ValueError
        If ``model`` holds no :class:`~sci_moe.moe.RoutedModule`.

    Examples
    --------
    >>> from sci_moe.moe import MoE
    >>> assert_routed_module(MoE(d_model=8, num_experts=4, top_k=2), torch.randn(5, 8))
    1
    """
    routed = [(n, m) for n, m in model.named_modules() if isinstance(m, RoutedModule)]
    if not routed:
        raise ValueError(f"{type(model).__name__} holds no sci_moe.moe.RoutedModule to check")
    calls = []

    def wrap(name, module, forward):
        def recorded(x, *args, return_routing=False, **kw):
            y, info = forward(x, *args, return_routing=True, **kw)
            calls.append((name or type(module).__name__, module, x, info.routing, y))
            return (y, info) if return_routing else y

        return recorded

    inputs = [_leaf(a) for a in inputs]
    kwargs = {k: _leaf(v) for k, v in kwargs.items()}
    for name, m in routed:
        m.forward = wrap(name, m, m.forward)
    try:
        with torch.enable_grad():
            model(*inputs, **kwargs)
    finally:
        for _, m in routed:
            del m.forward
    if not calls:
        raise AssertionError("no RoutedModule was called by the model's forward")
    for i, (name, m, x, routing, y) in enumerate(calls):
        _check_call(f"{name} (call {i})", m, x, routing, y, atol, rtol)
    return len(calls)


def _leaf(a):
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.detach().clone().requires_grad_(True)
    return a


def _check_call(label, module, x, routing, y, atol, rtol) -> None:
    d_atol, d_rtol = default_tolerance(x.dtype)
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    shared = getattr(module, "shared", None)
    y_ref = reference_routed_forward(None, module.experts, x, routing=routing, shared=shared)
    _check_close(f"{label}: output", y, y_ref, atol, rtol, x.dtype)
    if not y.requires_grad:
        return
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    wrt = [("input", x), ("routing.weights", routing.weights), *params]
    wrt = [(n, t) for n, t in wrt if t.requires_grad]
    g = torch.Generator(device="cpu").manual_seed(1234)
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64).to(y.dtype).to(y.device)
    tensors = [t for _, t in wrt]
    g_fast = torch.autograd.grad((y * gy).sum(), tensors, retain_graph=True, allow_unused=True)
    g_ref = torch.autograd.grad((y_ref * gy).sum(), tensors, retain_graph=True, allow_unused=True)
    for (n, _), a, b in zip(wrt, g_fast, g_ref, strict=True):
        _check_close(f"{label}: grad[{n}]", a, b, atol, rtol, x.dtype)
