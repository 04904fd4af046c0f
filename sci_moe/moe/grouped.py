"""Grouped GEMM over expert-sorted rows: the one primitive every expert bank uses."""

from __future__ import annotations

import torch

from . import kernels as _kernels

__all__ = [
    "forced_path",
    "grouped_linear",
    "grouped_mm_supported",
    "grouped_path",
    "set_grouped_path",
]

_GROUPED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_PATHS = ("auto", "grouped_mm", "bmm", "per_expert", "chunked")
_forced: str | None = None

# Measured size rule (one CPU core, float32; docs/results/moe_layer.rst): on an AVX2 CPU
# (AMD EPYC) the padded bmm beat torch._grouped_mm (a C++ loop of ``mm``) only with few
# experts, narrow rows and many rows per expert; on an AVX-512 CPU (Intel Xeon) it lost
# in every such case of the grid (benchmarks/moe_layer/results/moe_layer_grid.json), so the rule
# applies only where torch's CPU capability is AVX2.
_BMM_CPU_CAPABILITY = "AVX2"
_BMM_MAX_EXPERTS = 8
_BMM_MAX_WIDTH = 128
_BMM_MIN_ROWS_PER_EXPERT = 1024
# bfloat16 on an AVX-512 CPU with AMX (Intel Xeon; whole-layer interleaved A/B of the
# forced paths at d = 64-256, then the grid's "other path" rows in
# benchmarks/moe_layer/results/moe_layer_grid.json): each of grouped_mm's per-expert bfloat16 ``mm``
# calls pays a fixed overhead, so with many experts of small weights and few rows each
# one padded bmm won (1.03-2.93x in the development A/B wherever E >= 32, d_in d_out <=
# 256 x 128 and <= 128 rows per expert); with 8 experts, larger weights (d = 256) or more
# rows per expert grouped_mm won.
_BF16_BMM_CPU_CAPABILITY = "AVX512"
_BF16_BMM_MIN_EXPERTS = 32
_BF16_BMM_MAX_WEIGHT = 256 * 128
_BF16_BMM_MAX_ROWS_PER_EXPERT = 128


def set_grouped_path(path: str | None) -> None:
    """Force the CPU path of :func:`grouped_linear` and the dispatch (benchmarks, tests).

    Parameters
    ----------
    path : {"auto", "grouped_mm", "bmm", "per_expert", "chunked"} or None
        ``"grouped_mm"`` wherever ``torch._grouped_mm`` is valid, ``"bmm"`` (the padded
        ``bmm``) always, both on expert-sorted rows (no per-expert loop, no chunks);
        ``"per_expert"`` the per-expert loop of :func:`~sci_moe.moe.dispatch` wherever
        the bank has one (:func:`sci_moe.moe.dispatch.per_expert_path`; the GEMMs themselves
        then take the automatic choice); ``"chunked"`` the sorted path in cache-sized
        chunks of experts wherever the bank has a per-expert width
        (:func:`sci_moe.moe.chunked_path`; GEMMs again automatic); ``"auto"``/``None``
        the measured size rules of :func:`grouped_path`,
        :func:`sci_moe.moe.dispatch.per_expert_path` and :func:`sci_moe.moe.chunked_path`
        (the default).
        The Triton kernels on CUDA are switched separately
        (:func:`sci_moe.moe.kernels.set_kernels_enabled`).
    """
    global _forced
    if path is not None and path not in _PATHS:
        raise ValueError(f"path must be one of {_PATHS} or None, got {path!r}")
    _forced = None if path in (None, "auto") else path


def forced_path() -> str | None:
    """The path forced by :func:`set_grouped_path` (``None``: the automatic rules)."""
    return _forced


def grouped_path(x: torch.Tensor, weight: torch.Tensor) -> str:
    """The torch path :func:`grouped_linear` takes: ``"grouped_mm"`` or ``"bmm"``.

    ``"bmm"`` where ``torch._grouped_mm`` is not valid (:func:`grouped_mm_supported`),
    and on the CPU also where the padded ``bmm`` measured faster: on an AVX2 CPU
    (``torch.backends.cpu.get_cpu_capability() == "AVX2"``) with at most 8 experts,
    ``max(d_in, d_out) <= 128`` and at least 1024 rows per expert on average
    (``N >= 1024 E``). On AVX-512 CPUs ``grouped_mm`` measured faster there too, except
    in bfloat16 with many small experts and few rows each: there (capability
    ``"AVX512"``, bfloat16, ``E >= 32``, ``d_in d_out <= 32768`` and at most 128 rows
    per expert on average, ``N <= 128 E``) the padded ``bmm`` measured 1.03-2.93x faster
    per layer step (``docs/results/moe_layer.rst``). Overridden by
    :func:`set_grouped_path`.

    Parameters
    ----------
    x : Tensor, shape (N, d_in)
    weight : Tensor, shape (E, d_out, d_in)

    Examples
    --------
    >>> w = torch.zeros(4, 32, 32)
    >>> grouped_path(torch.zeros(8, 32), w), grouped_path(torch.zeros(8, 32).double(), w)
    ('grouped_mm', 'bmm')
    """
    if not grouped_mm_supported(x, weight) or _forced == "bmm":
        return "bmm"
    if _forced == "grouped_mm" or x.device.type != "cpu":
        return "grouped_mm"
    E, d_out, d_in = weight.shape
    capability = torch.backends.cpu.get_cpu_capability()
    if (
        capability == _BMM_CPU_CAPABILITY
        and E <= _BMM_MAX_EXPERTS
        and max(d_in, d_out) <= _BMM_MAX_WIDTH
        and x.shape[0] >= _BMM_MIN_ROWS_PER_EXPERT * E
    ):
        return "bmm"
    if (
        capability == _BF16_BMM_CPU_CAPABILITY
        and x.dtype == torch.bfloat16
        and E >= _BF16_BMM_MIN_EXPERTS
        and d_in * d_out <= _BF16_BMM_MAX_WEIGHT
        and x.shape[0] <= _BF16_BMM_MAX_ROWS_PER_EXPERT * E
    ):
        return "bmm"
    return "grouped_mm"


def grouped_mm_supported(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``torch._grouped_mm`` can run this problem exactly.

    Its constraints (torch 2.9-2.13): float32/bfloat16/float16 only (no float64), equal
    dtypes, every row stride a multiple of 16 bytes (so ``d_in`` and ``d_out`` multiples
    of ``16 / itemsize``), and on CUDA a compute capability of at least 9.0.
    """
    if not hasattr(torch, "_grouped_mm"):
        return False
    if x.dtype not in _GROUPED_DTYPES or weight.dtype != x.dtype:
        return False
    if x.device.type == "cuda":
        if torch.cuda.get_device_capability(x.device)[0] < 9 or x.dtype != torch.bfloat16:
            return False
    elif x.device.type != "cpu":
        return False
    align = 16 // x.element_size()
    d_out, d_in = weight.shape[-2:]
    return d_in % align == 0 and d_out % align == 0


def grouped_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    counts: torch.Tensor,
    offsets: torch.Tensor,
    bias: torch.Tensor | None = None,
    expert: torch.Tensor | None = None,
) -> torch.Tensor:
    """``y[r] = x[r] @ weight[e(r)].T (+ bias[e(r)])`` for rows sorted by expert.

    Parameters
    ----------
    x : Tensor, shape (N, d_in)
        Rows sorted by expert: the first ``counts[0]`` rows belong to expert 0, etc.
        ``N == counts.sum()``.
    weight : Tensor, shape (E, d_out, d_in)
        Stacked expert weights in ``nn.Linear`` layout.
    counts : Tensor, shape (E,), int64
        Rows per expert.
    offsets : Tensor, shape (E,), int32
        Inclusive cumulative ``counts``.
    bias : Tensor, shape (E, d_out), optional
    expert : Tensor, shape (N,), int64, optional
        Expert id of each row (needed with ``bias`` and by the padded fallback;
        computed from ``counts`` when omitted).

    Returns
    -------
    Tensor, shape (N, d_out)

    Notes
    -----
    On CUDA, when triton imports and the dtypes are float32/bfloat16/float16, the
    Triton kernels of :mod:`sci_moe.moe.kernels` run the GEMM (forward and backward,
    float32 accumulation, no host sync); switch them off with
    ``sci_moe.moe.kernels.set_kernels_enabled(False)`` or ``SCI_MOE_KERNELS=0``.
    Otherwise (and always on the CPU) ``torch._grouped_mm`` runs it (CUTLASS on CUDA
    sm90+, a loop of ``mm`` in C++ on CPU). Its weight-gradient form needs ``N`` to give
    16-byte-aligned strides as well, so rows are zero-padded to a multiple of the
    alignment; rows past ``offsets[-1]`` are never read or written by the groups and
    are sliced off. Otherwise an exact padded ``bmm`` is used (any dtype, any size):
    where ``torch._grouped_mm`` is not valid, and on the CPU where the measured size rule
    of :func:`grouped_path` says it is faster.
    """
    N = x.shape[0]
    if N == 0:
        return x.new_zeros(0, weight.shape[1])
    if _kernels.use_kernels(x, weight):
        y = _kernels.triton_grouped_linear(x, weight, counts, offsets)
        if bias is not None:
            if expert is None:
                expert = torch.repeat_interleave(
                    torch.arange(weight.shape[0], device=x.device), counts, output_size=N
                )
            y = y + bias.index_select(0, expert)
        return y
    path = grouped_path(x, weight)
    if expert is None and (bias is not None or path == "bmm"):
        expert = torch.repeat_interleave(torch.arange(weight.shape[0], device=x.device), counts)
    if path == "grouped_mm":
        align = 16 // x.element_size()
        pad = (-N) % align
        xp = torch.nn.functional.pad(x, (0, 0, 0, pad)) if pad else x
        y = torch._grouped_mm(xp, weight.transpose(-2, -1), offs=offsets)
        if pad:
            y = y[:N]
    else:
        y = _padded_bmm(x, weight, counts, expert)
    if bias is not None:
        y = y + bias.index_select(0, expert)
    return y


def _padded_bmm(x, weight, counts, expert):
    """Exact fallback: scatter rows into ``(E, max_count, d_in)``, one ``bmm``, gather.

    ``bmm(rows, W^T)`` gives the weight gradient in ``(E, d_in, d_out)`` layout, which
    autograd copies (strided) into the weight's ``(E, d_out, d_in)``: ``E d_out d_in``
    elements. ``bmm(W, rows^T)`` gives it in the weight's own layout but transposes the
    ``(E, d_out, max_count)`` output and its gradient: ``2 E max_count d_out`` elements.
    The smaller copy is taken (``2 max_count < d_in``: the second form); at d = 1024
    with 32 rows per expert this made the padded bmm's forward + backward 4-6x faster
    (``docs/results/moe_layer.rst``).
    """
    E = weight.shape[0]
    max_count = int(counts.max())
    starts = torch.cumsum(counts, 0) - counts
    # Flat slot of each row in the (E * max_count) padded rows: one index_copy / one
    # index_select (their backward: index_select / index_add_), no 2-D advanced indexing.
    flat = torch.arange(x.shape[0], device=x.device) - starts[expert] + expert * max_count
    buf = x.new_zeros(E * max_count, x.shape[1]).index_copy(0, flat, x)
    rows = buf.view(E, max_count, -1)
    if 2 * max_count < x.shape[1]:
        out = torch.bmm(weight, rows.transpose(1, 2)).transpose(1, 2)
        return out.reshape(E * max_count, -1).index_select(0, flat)
    out = torch.bmm(rows, weight.transpose(-2, -1))
    return out.view(E * max_count, -1).index_select(0, flat)
