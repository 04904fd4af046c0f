"""Selective scan of Mamba (v1): a log-depth chunked parallel scan and a recurrent reference.

The selective state-space recurrence (Gu & Dao 2023, Alg. 2), per channel ``d`` and
state index ``n``:

.. math::

    \\Delta_t &= \\mathrm{softplus}(\\delta_t + b_\\Delta) \\\\
    h_t &= e^{\\Delta_t A_{dn}}\\, h_{t-1} + \\Delta_t B_{t n} u_t \\\\
    y_t &= \\textstyle\\sum_n C_{t n} h_{t n} + D_d u_t, \\qquad
    y_t \\leftarrow y_t \\cdot \\mathrm{silu}(z_t)

:func:`selective_scan` computes every ``h_t`` at once: the sequence is cut into chunks,
each chunk is scanned with a work-efficient even/odd parallel scan of the affine maps
``h -> a h + b`` (:func:`linear_scan`, ``log2(chunk)`` vectorised levels), the chunk
end states are combined by a second scan over chunks, and each chunk then adds its
incoming state times its cumulative decay. No Python loop runs over time steps and every decay
product is ``<= 1`` (no overflow, unlike ``exp(-cumsum)`` tricks). Autograd gives the
gradients. :func:`selective_scan_recurrent` is the same recurrence as one fused autograd
node for the CPU: a loop over time of one in-place update per step on ``(batch, d_inner,
d_state)`` slices and a hand-written backward (the adjoint recurrence), about four times
faster there than the parallel scan, whose ``log2(chunk)`` levels each allocate and copy
full ``(batch, length, d_inner, d_state)`` tensors. :func:`selective_scan_reference` is the
step-by-step loop (what
transformers' slow path and ``mamba_ssm.selective_scan_ref`` do) used as the reference;
:func:`selective_state_step` is one step of it for generation.

Shapes follow ``mamba_ssm``: ``u, delta, z`` are ``(batch, d_inner, length)``,
``A`` is ``(d_inner, d_state)``, ``B, C`` are ``(batch, d_state, length)``.
"""

from __future__ import annotations

import threading
import weakref

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .scan_kernel import _check

__all__ = [
    "linear_scan",
    "selective_scan",
    "selective_scan_recurrent",
    "selective_scan_reference",
    "selective_state_step",
]

_BACKENDS = ("auto", "torch", "triton")


def linear_scan(
    a: torch.Tensor, b: torch.Tensor, dim: int, want_decay: bool = True
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Inclusive scan of affine maps ``h_t = a_t h_{t-1} + b_t`` (``h_{-1} = 0``) along ``dim``.

    Work-efficient even/odd (Blelloch-style) recursion: neighbouring maps are composed
    in pairs, ``(a_{2i+1} a_{2i},\\; a_{2i+1} b_{2i} + b_{2i+1})``, the half-length
    sequence of pairs is scanned recursively (its results are the odd states) and the
    even states follow as ``h_{2i} = a_{2i} h_{2i-1} + b_{2i}``. ``ceil(log2 L)`` levels
    of element-wise work, about ``3 L`` map applications in total, no loop over time.

    Parameters
    ----------
    a, b : Tensor, same shape
        Decays and inputs.
    dim : int
        Scanned dimension (length ``L``).
    want_decay : bool
        Also return the cumulative decays (needed to carry a state into a chunk).

    Returns
    -------
    decay : Tensor or None
        Cumulative decays ``prod_{s <= t} a_s`` (``None`` unless ``want_decay``).
    h : Tensor
        The states ``h_t``.
    """
    dim = dim % a.dim()
    L = a.shape[dim]
    if L <= 1:
        return (a if want_decay else None), b
    if L % 2:  # identity map at the tail
        shape = list(a.shape)
        shape[dim] = 1
        a = torch.cat([a, a.new_ones(shape)], dim=dim)
        b = torch.cat([b, b.new_zeros(shape)], dim=dim)
    a0, a1 = a.narrow(dim, 0, a.shape[dim]).unflatten(dim, (-1, 2)).unbind(dim + 1)
    b0, b1 = b.unflatten(dim, (-1, 2)).unbind(dim + 1)
    pa, pb = linear_scan(a1 * a0, a1 * b0 + b1, dim, want_decay)
    h_even = a0 * _shift(pb, 1, dim, fill=0.0) + b0
    h = torch.stack([h_even, pb], dim=dim + 1).flatten(dim, dim + 1).narrow(dim, 0, L)
    decay = None
    if want_decay:
        d_even = a0 * _shift(pa, 1, dim, fill=1.0)
        decay = torch.stack([d_even, pa], dim=dim + 1).flatten(dim, dim + 1).narrow(dim, 0, L)
    return decay, h


def _shift(x: torch.Tensor, step: int, dim: int, fill: float) -> torch.Tensor:
    """``x`` moved ``step`` places forward along ``dim``, the front filled with ``fill``."""
    dim = dim % x.dim()
    pad_shape = list(x.shape)
    pad_shape[dim] = step
    front = x.new_full(pad_shape, fill)
    return torch.cat([front, x.narrow(dim, 0, x.shape[dim] - step)], dim=dim)


def _discretize(u, delta, A, B, delta_bias, delta_softplus):
    """``dA = exp(Δ A)`` and ``dBu = Δ B u`` of shape ``(batch, length, d_inner, d_state)``."""
    dtype = torch.promote_types(u.dtype, torch.float32)
    delta = delta.to(dtype)
    if delta_bias is not None:
        delta = delta + delta_bias.to(dtype)[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    dt = delta.transpose(1, 2)  # (b, L, d)
    dA = torch.exp(dt[..., None] * A.to(dtype))  # (b, L, d, n)
    dBu = (dt * u.transpose(1, 2).to(dtype))[..., None] * B.transpose(1, 2).to(dtype)[:, :, None]
    return dA, dBu, dtype


def _finish(h, u, C, D, z, out_dtype, dtype):
    """``y = (sum_n C h + D u) * silu(z)`` from states ``h`` of shape ``(b, L, d, n)``."""
    y = torch.einsum("bldn,bnl->bdl", h, C.to(dtype))
    if D is not None:
        y = y + D.to(dtype)[:, None] * u.to(dtype)
    if z is not None:
        y = y * F.silu(z.to(dtype))
    return y.to(out_dtype)


def selective_scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    initial_state: torch.Tensor | None = None,
    return_last_state: bool = False,
    chunk_size: int = 256,
    backend: str = "auto",
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Selective scan, parallel over time (chunked log-depth scan), Triton on CUDA.

    Parameters
    ----------
    u : Tensor, shape (batch, d_inner, length)
        Input of the SSM (the convolved, activated x branch).
    delta : Tensor, shape (batch, d_inner, length)
        Time steps before ``delta_bias`` and softplus.
    A : Tensor, shape (d_inner, d_state)
        State matrix (diagonal, negative real: ``-exp(A_log)``).
    B, C : Tensor, shape (batch, d_state, length)
        Input-dependent input and output matrices.
    D : Tensor, shape (d_inner,), optional
        Skip connection.
    z : Tensor, shape (batch, d_inner, length), optional
        Gate: the output is multiplied by ``silu(z)``.
    delta_bias : Tensor, shape (d_inner,), optional
    delta_softplus : bool
    initial_state : Tensor, shape (batch, d_inner, d_state), optional
        State ``h_{-1}`` (zero by default), for chunked prefill and generation.
    return_last_state : bool
        Also return ``h_{L-1}``.
    chunk_size : int
        Time steps per chunk of the parallel scan (a power of two is most efficient);
        at least the length scans the whole sequence in one piece.
    backend : {"auto", "torch", "triton"}
        ``"auto"`` runs the Triton kernels (:func:`~.scan_kernel.triton_selective_scan`)
        for CUDA tensors when :func:`~.scan_kernel.use_triton_scan` allows it and the
        torch chunked scan otherwise (CPU, float64, no triton, kernels switched off by
        :func:`sci_moe.moe.kernels.set_kernels_enabled` or ``SCI_MOE_KERNELS=0``);
        ``"torch"`` and ``"triton"`` force one.

    Returns
    -------
    y : Tensor, shape (batch, d_inner, length), dtype of ``u``
    last_state : Tensor, shape (batch, d_inner, d_state), float32 or float64
        Only with ``return_last_state=True``.
    """
    _check(u, delta, A, B, C, D, z, delta_bias, initial_state)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend != "torch":
        from .scan_kernel import triton_selective_scan, use_triton_scan

        tensors = (u, delta, A, B, C, D, z, delta_bias, initial_state)
        if backend == "triton" or (u.numel() and use_triton_scan(*tensors)):
            return triton_selective_scan(
                u, delta, A, B, C, D, z, delta_bias, delta_softplus, initial_state,
                return_last_state,
            )  # fmt: skip
    b, d, L = u.shape
    n = A.shape[1]
    dA, dBu, dtype = _discretize(u, delta, A, B, delta_bias, delta_softplus)
    if initial_state is not None:
        first = dBu[:, :1] + dA[:, :1] * initial_state.to(dtype)[:, None]
        dBu = torch.cat([first, dBu[:, 1:]], dim=1)
    if L == 0:
        h = dBu
    else:
        Lc = min(chunk_size, L)
        nc = -(-L // Lc)
        pad = nc * Lc - L
        if pad:  # identity maps at the tail: a = 1, b = 0
            dA = torch.cat([dA, dA.new_ones(b, pad, d, n)], dim=1)
            dBu = torch.cat([dBu, dBu.new_zeros(b, pad, d, n)], dim=1)
        a = dA.view(b, nc, Lc, d, n)
        cum, h = linear_scan(a, dBu.view(b, nc, Lc, d, n), dim=2, want_decay=nc > 1)
        if nc > 1:
            # state entering chunk c = inclusive scan over chunk ends, shifted by one
            _, ends = linear_scan(cum[:, :, -1], h[:, :, -1], dim=1)
            carry = _shift(ends, 1, dim=1, fill=0.0)
            h = h + cum * carry[:, :, None]
        h = h.reshape(b, nc * Lc, d, n)[:, :L]
    y = _finish(h, u, C, D, z, u.dtype, dtype)
    if return_last_state:
        last = (
            h[:, -1]
            if L
            else (initial_state if initial_state is not None else dBu.new_zeros(b, d, n))
        )
        return y, last
    return y


_WORKSPACE = threading.local()


def _workspace(slot: int, like: torch.Tensor) -> torch.Tensor:
    """A scratch tensor shaped like ``like``, kept per thread and slot for the next call.

    The recurrent scan's backward writes its two ``(L, b, d, n)`` temporaries into these
    instead of fresh allocations: memory the previous step already touched, ~10 % of a
    small Mamba LM's CPU training step (writing fresh multi-MB tensors meets cold cache
    lines). Only backward uses them, never returns them, and runs one call per thread
    at a time; a buffer of another shape, dtype or device is replaced (one per slot).
    """
    bufs = getattr(_WORKSPACE, "bufs", None)
    if bufs is None:
        bufs = _WORKSPACE.bufs = {}
    buf = bufs.get(slot)
    if (
        buf is None
        or buf.shape != like.shape
        or buf.dtype != like.dtype
        or buf.device != like.device
    ):
        buf = bufs[slot] = torch.empty_like(like, memory_format=torch.contiguous_format)
    return buf


_POOL: dict[tuple, list[torch.Tensor]] = {}
_POOL_KEEP = 8


def _pooled(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A tensor of ``shape`` (dtype and device of ``like``) on memory recycled from
    earlier calls: the recurrent scan's saved ``(L, b, d, n)`` tensors.

    The caller gets a fresh view of a pooled base tensor; a finalizer returns the base
    to the pool once that view is gone, i.e. once nothing holds it any more (after the
    backward that used it, or at once under ``no_grad``; a retained graph keeps it). So
    a training step writes its states into memory the previous step touched instead of
    fresh multi-MB allocations (cold cache lines: ~2 ms instead of ~0.2 ms per 4 MB
    write in a 1-thread step). At most ``_POOL_KEEP`` free bases are kept per shape.
    """
    key = (tuple(shape), like.dtype, like.device)
    free = _POOL.setdefault(key, [])
    try:
        base = free.pop()
    except IndexError:
        base = torch.empty(shape, dtype=like.dtype, device=like.device)
    view = base.view(shape)
    weakref.finalize(view, _give_back, free, base).atexit = False
    return view


def _give_back(free: list[torch.Tensor], base: torch.Tensor) -> None:
    if len(free) < _POOL_KEEP:
        free.append(base)


class _RecurrentScan(torch.autograd.Function):
    """The fused recurrence, time-major: ``ys, h_{L-1} = f(dt, u, A, B, C, h0)``.

    ``dt, u (L, b, d)`` (time steps after bias and softplus), ``A (d, n)``, ``B, C (L, b,
    n)``, ``h0 (b, d, n)``, all contiguous of one dtype; ``ys (L, b, d) = sum_n C h``.
    Forward: ``dA = exp(dt A)`` and ``dBu = dt u B`` as ``(L, b, d, n)`` tensors, then
    ``h_t = dA_t h_{t-1} + dBu_t`` in place, one ``addcmul_`` per step. Backward: the
    adjoint ``G_t = dL/dh_t = C_t gy_t + dA_{t+1} G_{t+1}`` (one ``addcmul_`` per step
    backwards), then every gradient from ``G`` and the saved states in a few vectorised
    passes (``d(dt A) = G h_{t-1} dA``), ``G`` and one temporary in per-thread scratch
    buffers (:func:`_workspace`). ``dA`` and the states live in recycled memory
    (:func:`_pooled`). Once differentiable (no gradients of gradients: use the
    parallel scan for those).
    """

    @staticmethod
    def forward(ctx, dt, u, A, B, C, h0):
        L, b, d = dt.shape
        n = A.shape[1]
        shape = (L, b, d, n)
        dA = torch.mul(dt.unsqueeze(-1), A, out=_pooled(shape, dt)).exp_()
        # dBu, then the states
        hs = torch.mul((dt * u).unsqueeze(-1), B.unsqueeze(2), out=_pooled(shape, dt))
        hs[0].addcmul_(dA[0], h0)
        for t in range(1, L):
            hs[t].addcmul_(dA[t], hs[t - 1])
        # sum_n C h as a row vector times h^T: BLAS reads the transpose in place, ~4x
        # faster than the batched matrix-vector product h C on the CPU
        ys = torch.bmm(C.view(L * b, 1, n), hs.view(L * b, d, n).transpose(1, 2)).view(L, b, d)
        ctx.save_for_backward(dt, u, A, B, C, h0, dA, hs)
        return ys, hs[L - 1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, gys, gh_last):
        dt, u, A, B, C, h0, dA, hs = ctx.saved_tensors
        L, b, d = dt.shape
        n = A.shape[1]
        need = ctx.needs_input_grad
        gys = gys.contiguous()
        G = torch.mul(gys.unsqueeze(-1), C.unsqueeze(2), out=_workspace(0, dA))
        G[L - 1].add_(gh_last)
        for t in range(L - 2, -1, -1):
            G[t].addcmul_(dA[t + 1], G[t + 1])
        g_dt = g_u = g_A = g_B = g_C = g_h0 = None
        flat = G.view(L * b, d, n)
        if need[4]:
            g_C = torch.bmm(gys.view(L * b, 1, d), hs.view(L * b, d, n)).view(L, b, n)
        if need[3]:
            g_B = torch.bmm((dt * u).view(L * b, 1, d), flat).view(L, b, n)
        if need[5]:
            g_h0 = G[0] * dA[0]
        if need[0] or need[1]:
            g_dtu = torch.bmm(B.view(L * b, 1, n), flat.transpose(1, 2)).view(L, b, d)
            g_u = g_dtu * dt if need[1] else None
            g_dt = g_dtu * u if need[0] else None
        if need[0] or need[2]:
            G[1:].mul_(hs[:-1])  # G becomes dL/d(dt A) = G h_{t-1} dA
            G[0].mul_(h0)
            G.mul_(dA)
            if need[2]:
                g_A = torch.mul(G, dt.unsqueeze(-1), out=_workspace(1, G)).sum((0, 1))
            if need[0]:
                g_dt = g_dt + G.mul_(A).sum(-1)
        return g_dt, g_u, g_A, g_B, g_C, g_h0


def selective_scan_recurrent(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    initial_state: torch.Tensor | None = None,
    return_last_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Selective scan as one fused recurrent autograd node (the fast scan on the CPU).

    Same arguments and returns as :func:`selective_scan` (without ``chunk_size`` and
    ``backend``) and the same recurrence, evaluated in the order of
    :func:`selective_scan_reference` (``h_t = e^{\\Delta_t A} h_{t-1} + \\Delta_t B_t u_t``
    one step after the other) with a hand-written backward (see :class:`_RecurrentScan`):
    results equal both up to floating-point rounding. Work ``O(L)`` and a Python loop of
    ``L`` in-place steps forward and backward, on ``(batch, length, d_inner, d_state)``
    buffers it allocates twice per pass instead of the parallel scan's dozens (backward
    keeps two per thread for the next call); on a GPU the parallel scan (or the Triton
    kernels) avoid the loop's ``L`` launches. Once differentiable: gradients of gradients
    need :func:`selective_scan`.
    """
    _check(u, delta, A, B, C, D, z, delta_bias, initial_state)
    b, d, L = u.shape
    n = A.shape[1]
    dtype = torch.promote_types(u.dtype, torch.float32)
    h0 = u.new_zeros(b, d, n, dtype=dtype) if initial_state is None else initial_state.to(dtype)
    if L == 0:
        y = u.new_zeros(b, d, 0)
        return (y, h0) if return_last_state else y

    def time_major(x):  # (b, c, L) -> (L, b, c), contiguous
        return x.to(dtype).permute(2, 0, 1).contiguous()

    dt = time_major(delta)
    if delta_bias is not None:
        dt = dt + delta_bias.to(dtype)
    if delta_softplus:
        dt = F.softplus(dt)
    uL = time_major(u)
    y, last = _RecurrentScan.apply(dt, uL, A.to(dtype), time_major(B), time_major(C), h0)
    if D is not None:
        y = y + D.to(dtype) * uL
    if z is not None:
        y = y * F.silu(time_major(z))
    y = y.permute(1, 2, 0).to(u.dtype)
    return (y, last) if return_last_state else y


def selective_scan_reference(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    initial_state: torch.Tensor | None = None,
    return_last_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step selective scan (a Python loop over time): the reference.

    Same arguments and returns as :func:`selective_scan` (without ``chunk_size``);
    the same computation as ``mamba_ssm``'s ``selective_scan_ref`` and transformers'
    slow path.
    """
    _check(u, delta, A, B, C, D, z, delta_bias, initial_state)
    b, d, L = u.shape
    n = A.shape[1]
    dA, dBu, dtype = _discretize(u, delta, A, B, delta_bias, delta_softplus)
    h = u.new_zeros(b, d, n, dtype=dtype) if initial_state is None else initial_state.to(dtype)
    states = []
    for t in range(L):
        h = dA[:, t] * h + dBu[:, t]
        states.append(h)
    hs = torch.stack(states, dim=1) if states else dBu
    y = _finish(hs, u, C, D, z, u.dtype, dtype)
    return (y, h) if return_last_state else y


def selective_state_step(
    state: torch.Tensor,
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One recurrent step for generation (constant-size state).

    Parameters
    ----------
    state : Tensor, shape (batch, d_inner, d_state)
        ``h_{t-1}``.
    u, delta : Tensor, shape (batch, d_inner)
    A : Tensor, shape (d_inner, d_state)
    B, C : Tensor, shape (batch, d_state)
    D, delta_bias : Tensor, shape (d_inner,), optional
    z : Tensor, shape (batch, d_inner), optional
    delta_softplus : bool

    Returns
    -------
    y : Tensor, shape (batch, d_inner)
    state : Tensor, shape (batch, d_inner, d_state)
        ``h_t``.
    """
    if u.dim() != 2 or state.shape != (u.shape[0], u.shape[1], A.shape[1]):
        raise ValueError(
            f"state must have shape (batch, d_inner, d_state) = "
            f"({u.shape[0]}, {u.shape[1] if u.dim() > 1 else '?'}, {A.shape[1]}) for u of shape "
            f"{tuple(u.shape)}; got {tuple(state.shape)}"
        )
    y, h = selective_scan_reference(
        u[..., None],
        delta[..., None],
        A,
        B[..., None],
        C[..., None],
        D,
        None if z is None else z[..., None],
        delta_bias,
        delta_softplus,
        initial_state=state,
        return_last_state=True,
    )
    return y[..., 0], h
