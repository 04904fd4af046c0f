"""The Triton selective scan: availability, automatic choice and autograd.

Also the argument checks both scans share (:mod:`.scan` imports them from here).

:func:`~.scan.selective_scan` calls :func:`triton_selective_scan` by itself for CUDA
tensors when :func:`use_triton_scan` says so; everywhere else (the CPU, float64, no
triton) it runs the torch chunked scan. This module imports without triton; the kernels
(:mod:`._triton_scan`) load on first use. Forward and backward are Triton kernels (see
:mod:`._triton_scan`): float32 state and accumulation, inputs in float32, bfloat16 or
float16, deterministic. On the CPU the kernels run only under Triton's interpreter
(``TRITON_INTERPRET=1``, set before triton is imported; slow, for tests).

The automatic choice honours the one kernel switch of the core,
:func:`sci_moe.moe.kernels.set_kernels_enabled` (or the environment variable
``SCI_MOE_KERNELS=0``; see :func:`sci_moe.moe.kernels.kernels_enabled`), which also
governs the grouped-GEMM kernels; per call, ``selective_scan(..., backend="torch")``.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

from sci_moe.moe.kernels import kernels_enabled

__all__ = [
    "triton_scan_available",
    "triton_scan_supported",
    "triton_selective_scan",
    "use_triton_scan",
]

SCAN_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@functools.lru_cache(maxsize=1)
def triton_scan_available() -> bool:
    """Whether ``triton`` can be imported (the kernels are compiled on first use)."""
    return importlib.util.find_spec("triton") is not None


def _check(u, delta, A, B, C, D, z, delta_bias, initial_state):
    """Shapes of :func:`~.scan.selective_scan`'s arguments (every backend); ValueError if wrong."""
    if u.dim() != 3:
        raise ValueError(f"u must have shape (batch, d_inner, length), got {tuple(u.shape)}")
    b, d, L = u.shape
    if delta.shape != u.shape:
        raise ValueError(
            f"delta must have the shape of u {tuple(u.shape)}, got {tuple(delta.shape)}"
        )
    if A.dim() != 2 or A.shape[0] != d:
        raise ValueError(f"A must have shape (d_inner={d}, d_state), got {tuple(A.shape)}")
    n = A.shape[1]
    for name, t in (("B", B), ("C", C)):
        if t.shape != (b, n, L):
            raise ValueError(f"{name} must have shape ({b}, {n}, {L}), got {tuple(t.shape)}")
    if D is not None and D.shape != (d,):
        raise ValueError(f"D must have shape ({d},), got {tuple(D.shape)}")
    if delta_bias is not None and delta_bias.shape != (d,):
        raise ValueError(f"delta_bias must have shape ({d},), got {tuple(delta_bias.shape)}")
    if z is not None and z.shape != u.shape:
        raise ValueError(f"z must have the shape of u {tuple(u.shape)}, got {tuple(z.shape)}")
    if initial_state is not None and initial_state.shape != (b, d, n):
        raise ValueError(
            f"initial_state must have shape (batch={b}, d_inner={d}, d_state={n}), "
            f"got {tuple(initial_state.shape)}"
        )


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off")


def triton_scan_supported(*tensors: torch.Tensor | None) -> bool:
    """Whether the kernels accept these tensors (the ``None`` ones are skipped).

    All on one CUDA device (or the CPU under ``TRITON_INTERPRET=1``), floating point of
    a kernel dtype (float32, bfloat16, float16). Any sizes and strides.
    """
    ts = [t for t in tensors if t is not None]
    if not ts:
        return False
    dev = ts[0].device
    if any(t.device != dev or t.dtype not in SCAN_DTYPES for t in ts):
        return False
    return dev.type == "cuda" or (dev.type == "cpu" and _interpreting())


def use_triton_scan(*tensors: torch.Tensor | None) -> bool:
    """The automatic choice of :func:`~.scan.selective_scan` (``backend="auto"``).

    True for CUDA tensors the kernels support, when triton imports and the kernels are
    enabled (:func:`sci_moe.moe.kernels.kernels_enabled`: switched off by
    ``set_kernels_enabled(False)`` or ``SCI_MOE_KERNELS=0``). Always False for CPU tensors.
    """
    ts = [t for t in tensors if t is not None]
    return (
        bool(ts)
        and kernels_enabled()
        and ts[0].is_cuda
        and triton_scan_supported(*ts)
        and triton_scan_available()
    )


class _TritonScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, delta_bias, h0, softplus):
        from . import _triton_scan as k

        f32 = torch.float32
        A32 = A.detach().to(f32).contiguous()
        D32 = D.detach().to(f32).contiguous()
        bias32 = delta_bias.detach().to(f32).contiguous()
        h032 = h0.detach().to(f32).contiguous()
        store = any(ctx.needs_input_grad)  # grad mode is off inside forward
        y, h_last, states = k.scan_forward(
            u, delta, A32, B, C, D32, z, bias32, h032, softplus, store
        )
        if states is not None:
            ctx.save_for_backward(u, delta, A32, B, C, D32, z, bias32, h032, states)
        ctx.softplus = softplus
        ctx.dtypes = [
            None if t is None else t.dtype for t in (u, delta, A, B, C, D, z, delta_bias, h0)
        ]
        return y, h_last

    @staticmethod
    def backward(ctx, dy, dh_last):
        from . import _triton_scan as k

        if not ctx.saved_tensors:
            raise RuntimeError("the Triton scan ran without saving its states (no_grad)")
        u, delta, A, B, C, D, z, bias, h0, states = ctx.saved_tensors
        if dy is None:
            dy = torch.zeros_like(u)
        if dh_last is None:
            dh_last = torch.zeros_like(h0)
        grads = k.scan_backward(
            u, delta, A, B, C, D, z, bias, h0, states, dy, dh_last.float().contiguous(),
            ctx.softplus,
        )  # fmt: skip
        out = [g if g is None else g.to(dt) for g, dt in zip(grads, ctx.dtypes, strict=True)]
        return (*out, None)


def triton_selective_scan(
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
    """Selective scan in Triton (forward and backward kernels).

    Same arguments, returns and checks as :func:`~.scan.selective_scan` (without
    ``chunk_size``); CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``.

    Raises
    ------
    ValueError
        Shapes that do not fit (as :func:`~.scan.selective_scan`), or tensors the
        kernels do not take (see :func:`triton_scan_supported`).
    """
    _check(u, delta, A, B, C, D, z, delta_bias, initial_state)
    if not triton_scan_supported(u, delta, A, B, C, D, z, delta_bias, initial_state):
        raise ValueError(
            "the Triton scan needs float32/bfloat16/float16 tensors on one CUDA device "
            "(or the CPU under TRITON_INTERPRET=1); use selective_scan(..., backend='torch')"
        )
    if not triton_scan_available():
        raise ValueError("the Triton scan needs triton: pip install 'sci-moe[triton]'")
    b, d, _ = u.shape
    n = A.shape[1]
    D_ = u.new_zeros(d) if D is None else D
    bias = u.new_zeros(d) if delta_bias is None else delta_bias
    h0 = u.new_zeros(b, d, n, dtype=torch.float32) if initial_state is None else initial_state
    y, h = _TritonScan.apply(u, delta, A, B, C, D_, z, bias, h0, bool(delta_softplus))
    return (y, h) if return_last_state else y
