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
gradients. :func:`~.recurrent.selective_scan_recurrent` is the same recurrence as one fused autograd
node for the CPU: a loop over time of one in-place update per step on ``(batch, d_inner,
d_state)`` slices and a hand-written backward (the adjoint recurrence), about four times
faster there than the parallel scan, whose ``log2(chunk)`` levels each allocate and copy
full ``(batch, length, d_inner, d_state)`` tensors; its few full-size buffers can be memory
reused from the previous call, held by a caller-owned :class:`~.recurrent.ScanWorkspace`.
:func:`selective_scan_reference` is the step-by-step loop (what transformers' slow path
and ``mamba_ssm.selective_scan_ref`` do) used as the reference;
:func:`selective_state_step` is one step of it for generation.

Shapes follow ``mamba_ssm``: ``u, delta, z`` are ``(batch, d_inner, length)``,
``A`` is ``(d_inner, d_state)``, ``B, C`` are ``(batch, d_state, length)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .scan_kernel import _check

__all__ = [
    "linear_scan",
    "selective_scan",
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
