"""Python API of the Triton grouped-GEMM kernels: availability, autograd, wrappers.

This module imports without triton; the kernels (:mod:`._triton`) are imported on first
use.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass

import torch

from ..routing import DispatchPlan

__all__ = [
    "kernel_supported",
    "kernels_enabled",
    "scatter_grouped_linear",
    "set_kernels_enabled",
    "triton_available",
    "triton_grouped_linear",
    "use_kernels",
]

KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_ENV = "SCI_MOE_KERNELS"
_OFF = ("0", "off", "false", "no", "torch")
_enabled: bool | None = None


# ------------------------------------------------------------------ availability


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """Whether ``triton`` (and ``triton.language``) can be imported."""
    try:
        importlib.import_module("triton")
        importlib.import_module("triton.language")
    except Exception:
        return False
    return True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off")


def kernels_enabled() -> bool:
    """Whether the Triton kernels may be chosen automatically: the one kernel switch.

    Every automatic Triton path honours it: :meth:`~sci_moe.moe.ExpertBank.grouped_linear` here and
    the Mamba selective scan (``sci_moe.language.mamba.selective_scan``).

    ``True`` unless switched off with :func:`set_kernels_enabled` or the environment
    variable ``SCI_MOE_KERNELS=0`` (also ``off``, ``false``, ``no``, ``torch``).
    """
    if _enabled is not None:
        return _enabled
    return os.environ.get(_ENV, "1").strip().lower() not in _OFF


def set_kernels_enabled(enabled: bool | None) -> None:
    """Switch the automatic Triton paths on or off (``grouped_linear``, the Mamba scan).

    Parameters
    ----------
    enabled : bool or None
        ``None`` goes back to the environment default (see :func:`kernels_enabled`).
    """
    global _enabled
    _enabled = None if enabled is None else bool(enabled)


def kernel_supported(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the kernels accept this problem.

    ``x`` of shape ``(N, d_in)`` and ``weight`` of shape ``(E, d_out, d_in)`` with the
    same dtype (float32, bfloat16 or float16) on one CUDA device, or on the CPU when
    ``TRITON_INTERPRET=1`` (Triton's interpreter; slow, for tests). Any sizes and
    strides are accepted.
    """
    if x.dim() != 2 or weight.dim() != 3 or x.shape[1] != weight.shape[2]:
        return False
    if x.dtype not in KERNEL_DTYPES or weight.dtype != x.dtype or x.device != weight.device:
        return False
    return x.device.type == "cuda" or (x.device.type == "cpu" and _interpreting())


def use_kernels(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """The automatic choice of :meth:`~sci_moe.moe.ExpertBank.grouped_linear`.

    True for CUDA tensors the kernels support, when triton imports and the kernels are
    enabled. Always False for CPU tensors (the torch path is used there).
    """
    return (
        x.is_cuda
        and kernels_enabled()
        and kernel_supported(x, weight)
        and weight.shape[0] > 0
        and triton_available()
    )


def _kernels():
    from . import _triton

    return _triton


# ------------------------------------------------------------------------ layout


@dataclass
class _Layout:
    """Where the ``M`` expert-sorted rows come from and go to (see :class:`_ScatterLinear`)."""

    counts: torch.Tensor  # (E,) rows per expert
    ends: torch.Tensor  # (E,) inclusive cumsum of counts
    rows: int  # M
    block_m: int
    tiles: tuple[torch.Tensor, torch.Tensor]
    in_idx: torch.Tensor | None  # (M,) row of x read by sorted row r (None: r)
    out_idx: torch.Tensor | None  # (M,) row of y written by sorted row r (None: r)
    out_rows: int  # rows of y
    slot_idx: torch.Tensor | None  # (M,) (token, slot) position of r, for dx with in_idx
    num_slots: int  # T * k


def _tiles(counts, rows, block_m, cache=None):
    if cache is not None and ("tiles", block_m) in cache:
        return cache[("tiles", block_m)]
    tiles = _kernels().tile_table(counts, rows, block_m)
    if cache is not None:
        cache[("tiles", block_m)] = tiles
    return tiles


def _forward(x, weight, scale, lay: _Layout) -> torch.Tensor:
    _E, d_out, _d_in = weight.shape
    zeros = lay.out_idx is not None and lay.rows < lay.out_rows
    alloc = torch.zeros if zeros else torch.empty
    y = alloc(lay.out_rows, d_out, dtype=x.dtype, device=x.device)
    if lay.rows:
        _kernels().scatter_gemm(
            x,
            weight,
            (weight.stride(0), weight.stride(2), weight.stride(1)),  # B[e] = W[e]^T
            y,
            lay.counts,
            lay.ends,
            lay.tiles,
            lay.rows,
            d_out,
            weight.shape[2],
            lay.block_m,
            a_idx=lay.in_idx,
            c_idx=lay.out_idx,
            scale=scale,
        )
    return y


def _backward(dy, x, weight, scale, lay: _Layout, need_x, need_w, need_s):
    _E, d_out, d_in = weight.shape
    M = lay.rows
    kern = _kernels()
    dy = dy.to(x.dtype)
    dx = dw = ds = None
    if need_x or need_s:
        buf, c_idx = None, None
        if need_x:
            if lay.in_idx is not None:
                # One row per (token, slot), summed over the slots below: no atomics.
                alloc = torch.zeros if M < lay.num_slots else torch.empty
                buf = alloc(lay.num_slots, d_in, dtype=x.dtype, device=x.device)
                c_idx = lay.slot_idx
            else:
                buf = torch.empty(M, d_in, dtype=x.dtype, device=x.device)
        partial = None
        if M:
            partial = kern.scatter_gemm(
                dy,
                weight,
                (weight.stride(0), weight.stride(1), weight.stride(2)),  # B[e] = W[e]
                buf,
                lay.counts,
                lay.ends,
                lay.tiles,
                M,
                d_in,
                d_out,
                lay.block_m,
                a_idx=lay.out_idx,
                c_idx=c_idx,
                scale=scale,
                g=x if need_s else None,
                g_idx=lay.in_idx,
            )
        if need_x:
            if lay.in_idx is not None:
                T = x.shape[0]
                k = lay.num_slots // T
                dx = buf if k == 1 else buf.view(T, k, d_in).sum(1)
            else:
                dx = buf
        if need_s:
            ds = partial.sum(0).to(scale.dtype) if M else scale.new_zeros(0)
    if need_w:
        dw = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
        kern.grouped_xty(
            x,
            dy,
            dw,
            lay.counts,
            lay.ends,
            M,
            x_idx=lay.in_idx,
            dy_idx=lay.out_idx,
            scale=scale,
        )
    return dx, dw, ds


class _ScatterLinear(torch.autograd.Function):
    """``y[out(r)] = s_r * x[in(r)] @ W[e(r)]^T`` over expert-sorted rows ``r``."""

    @staticmethod
    def forward(ctx, x, weight, scale, lay):
        ctx.lay = lay
        ctx.save_for_backward(x, weight, scale)
        return _forward(x, weight, scale, lay)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        x, weight, scale = ctx.saved_tensors
        need_x, need_w, need_s = ctx.needs_input_grad[:3]
        dx, dw, ds = _backward(dy, x, weight, scale, ctx.lay, need_x, need_w, need_s)
        return dx, dw, ds, None


# -------------------------------------------------------------------------- API


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if not triton_available():
        raise ImportError(
            "the sci-moe kernels need triton: pip install 'sci-moe[triton]' (Linux x86-64)"
        )
    if x.dim() != 2 or weight.dim() != 3 or x.shape[1] != weight.shape[2]:
        raise ValueError(
            f"x must be (rows, d_in) and weight (E, d_out, d_in); got x {tuple(x.shape)}, "
            f"weight {tuple(weight.shape)}"
        )
    if not kernel_supported(x, weight):
        raise ValueError(
            f"the kernels need x and weight of one dtype among float32/bfloat16/float16 on a "
            f"CUDA device (or the CPU with TRITON_INTERPRET=1); got {x.dtype} on {x.device} "
            f"and {weight.dtype} on {weight.device}"
        )


def scatter_grouped_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    plan: DispatchPlan,
    gather_input: bool = False,
    scatter_output: bool = False,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Grouped expert GEMM that reads and writes rows through the plan's indices.

    For every kept assignment ``r`` (sorted by expert, ``r < plan.num_kept``) with
    token ``t = plan.token[r]``, slot position ``p = plan.order[r]`` (``= t k + j``)
    and expert ``e = plan.expert[r]``:

    .. math:: y[\\mathrm{out}(r)] = w_p \\; x[\\mathrm{in}(r)] \\, W_e^\\top

    with ``in(r) = t`` if ``gather_input`` else ``r``, ``out(r) = p`` if
    ``scatter_output`` else ``r``, and ``w_p = weights.flatten()[p]`` (1 without
    ``weights``). No permuted copy of ``x`` is made, and the backward pass uses no
    atomics (deterministic): the input gradient is written per (token, slot) and
    summed over the slots, the weight gradient is a grouped ``dY^T X`` per expert, and
    the gradient of ``weights`` is reduced in the input-gradient kernel.

    Parameters
    ----------
    x : Tensor, shape (T, d_in) if ``gather_input`` else (plan.num_kept, d_in)
        Token rows (gathered through ``plan.token``) or rows already sorted by expert.
    weight : Tensor, shape (E, d_out, d_in)
        Stacked expert weights in ``nn.Linear`` layout, same dtype as ``x``.
    plan : DispatchPlan
        From :attr:`Routing.plan <sci_moe.moe.Routing.plan>` (``T * k`` assignments).
        The kernels' tile tables are cached on it.
    gather_input : bool
        Read ``x`` rows through ``plan.token`` (scatter2scatter's grouped-in = False).
    scatter_output : bool
        Return one row per (token, slot) in ``(t, j)`` order, shape ``(T * k, d_out)``;
        rows of dropped slots are zero. ``y.view(T, k, d_out).sum(1)`` then combines
        the slots. Otherwise rows stay sorted by expert, shape
        ``(plan.num_kept, d_out)``.
    weights : Tensor, shape (T, k), optional
        Routing weights multiplied into the output rows in the float32 epilogue
        (differentiable).

    Returns
    -------
    Tensor, shape (T * k, d_out) if ``scatter_output`` else (plan.num_kept, d_out)
        In ``x``'s dtype; products accumulate in float32 (TF32 for float32 inputs only
        when ``torch.backends.cuda.matmul.allow_tf32`` is set).

    Examples
    --------
    A SwiGLU MoE with both GEMMs fused to the dispatch (``routing = router(x)``)::

        plan = routing.plan
        h = scatter_grouped_linear(x, gate_up, plan, gather_input=True)
        g, u = h.chunk(2, dim=-1)
        y = scatter_grouped_linear(F.silu(g) * u, down, plan, scatter_output=True,
                                   weights=routing.weights)
        y = y.view(T, k, -1).sum(1)
    """
    _check(x, weight)
    E = weight.shape[0]
    if plan.counts.numel() != E:
        raise ValueError(f"plan is for {plan.counts.numel()} experts but weight has {E}")
    M, num_slots = plan.num_kept, plan.order.numel()
    if gather_input:
        if x.shape[0] == 0 or num_slots % x.shape[0]:
            raise ValueError(
                f"gather_input=True needs x of shape (T, d_in) with T * k = {num_slots}; "
                f"got {x.shape[0]} rows"
            )
    elif x.shape[0] != M:
        raise ValueError(f"x must have plan.num_kept = {M} sorted rows, got {x.shape[0]}")
    scale = None
    if weights is not None:
        if weights.numel() != num_slots:
            raise ValueError(
                f"weights must have T * k = {num_slots} entries, got shape {tuple(weights.shape)}"
            )
        if not weights.is_floating_point():
            raise TypeError(f"weights must be floating point, got {weights.dtype}")
        scale = weights.reshape(-1)[plan.order[:M]]
    kern = _kernels()
    cache = plan.cache
    block_m = kern.block_m_for(M, E)
    slot_idx = plan.order[:M]
    lay = _Layout(
        counts=plan.counts,
        ends=plan.offsets,
        rows=M,
        block_m=block_m,
        tiles=_tiles(plan.counts, M, block_m, cache),
        in_idx=plan.token[:M] if gather_input else None,
        out_idx=slot_idx if scatter_output else None,
        out_rows=num_slots if scatter_output else M,
        slot_idx=slot_idx,
        num_slots=num_slots,
    )
    return _ScatterLinear.apply(x, weight, scale, lay)


def triton_grouped_linear(
    x: torch.Tensor, weight: torch.Tensor, counts: torch.Tensor, offsets: torch.Tensor
) -> torch.Tensor:
    """``y[r] = x[r] @ weight[e(r)].T`` for rows sorted by expert, with the Triton kernels.

    The kernel behind :meth:`~sci_moe.moe.ExpertBank.grouped_linear` on CUDA (same arguments,
    without bias). No host synchronisation.

    Parameters
    ----------
    x : Tensor, shape (N, d_in)
        Rows sorted by expert, ``N == counts.sum()``.
    weight : Tensor, shape (E, d_out, d_in)
    counts : Tensor, shape (E,), integer
        Rows per expert.
    offsets : Tensor, shape (E,), integer
        Inclusive cumulative ``counts``.

    Returns
    -------
    Tensor, shape (N, d_out)
    """
    _check(x, weight)
    E = weight.shape[0]
    if counts.numel() != E or offsets.numel() != E:
        raise ValueError(f"counts and offsets must have E = {E} entries")
    M = x.shape[0]
    kern = _kernels()
    block_m = kern.block_m_for(M, E)
    lay = _Layout(
        counts=counts,
        ends=offsets,
        rows=M,
        block_m=block_m,
        tiles=_tiles(counts, M, block_m) if M else (counts, counts),
        in_idx=None,
        out_idx=None,
        out_rows=M,
        slot_idx=None,
        num_slots=M,
    )
    return _ScatterLinear.apply(x, weight, None, lay)
