"""Cache-blocked sorted path: a GLU bank's experts in chunks of contiguous experts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from .grouped import forced_path, grouped_linear

if TYPE_CHECKING:
    from .routing import DispatchPlan

__all__ = ["chunked_forward", "chunked_path", "expert_chunks"]

# Measured size rule of the chunked sorted path (one core of an AMD EPYC with AVX-512, no
# AMX; float32 SwiGLU banks at d = 64-256; interleaved whole-layer A/B against the sorted
# path, benchmarks/moe_layer/paths.py --chunk-ab,
# benchmarks/moe_layer/results/moe_layer_chunk_ab*.json, docs/results/moe_layer.rst): with
# ``T k >= 16384`` sorted rows the chunked path (2 MiB
# chunks) won at the median of every run (1.09-1.12x over 14 cases; single cases down to
# 0.86-0.97 under load); at 8192 rows it won or lost by up to 10 %, below 8192 rows it
# lost in most cases (the stacked weights' gradient is one extra ``cat``, each chunk a
# few more calls). Wider rows (d = 1024) and bfloat16 were
# not measured, so the rule stays off there.
_CHUNK_BYTES = 2 * 2**20
_CHUNK_MIN_ROWS = 16384
_CHUNK_MAX_WIDTH = 512
_CHUNK_CPU_CAPABILITY = "AVX512"


class _Bank(Protocol):
    """What :func:`chunked_path` reads of an :class:`~sci_moe.moe.ExpertBank`."""

    per_expert_width: int | None


def expert_chunks(counts: list[int], row_bytes: int, budget: int) -> list[tuple]:
    """Contiguous expert ranges ``(e0, e1, r0, r1)`` of at most ``budget`` bytes of rows each.

    Greedy over the experts in order: expert ``e`` joins the current chunk while the
    chunk's rows times ``row_bytes`` stay within ``budget``; an expert larger than the
    budget is a chunk of its own. ``r0:r1`` are the chunk's rows in expert order.

    Parameters
    ----------
    counts : list of int
        Rows per expert (``plan.counts``).
    row_bytes : int
        Bytes of one row of the widest intermediate.
    budget : int
        Bytes per chunk.

    Returns
    -------
    list of (int, int, int, int)

    Examples
    --------
    >>> expert_chunks([3, 0, 2, 5, 1], row_bytes=10, budget=50)
    [(0, 3, 0, 5), (3, 4, 5, 10), (4, 5, 10, 11)]
    """
    out, e0, r0, rows = [], 0, 0, 0
    for e, c in enumerate(counts):
        if rows and (rows + c) * row_bytes > budget:
            out.append((e0, e, r0, r0 + rows))
            e0, r0, rows = e, r0 + rows, 0
        rows += c
    out.append((e0, len(counts), r0, r0 + rows))
    return out


def chunked_path(x: torch.Tensor, plan: DispatchPlan, experts: _Bank) -> bool:
    """Whether ``experts.forward_sorted`` runs its experts in cache-sized chunks.

    The sorted path runs one grouped GEMM per weight over all ``N = T k`` sorted rows, so
    its ``(N, w)`` intermediates (``w`` = :attr:`~sci_moe.moe.ExpertBank.per_expert_width`,
    ``2 d_hidden`` for SwiGLU/GeGLU) are written by one GEMM and read by the next pass
    after they have left the cache. The chunked path (:func:`chunked_forward`) runs
    grouped GEMM + GLU + grouped GEMM on contiguous experts whose ``(rows, w)``
    intermediate has at most 2 MiB, chunk after chunk, and concatenates the outputs
    (combined per token as on the sorted path). Taken on an AVX-512 CPU
    (``torch.backends.cpu.get_cpu_capability() == "AVX512"``) for float32 banks with a
    per-expert width ``w <= 512`` and ``N >= 16384`` rows, where it measured 1.09-1.12x
    faster at the median of the whole-layer A/B runs (``docs/results/moe_layer.rst``);
    the per-expert loop
    (:func:`~sci_moe.moe.per_expert_path`) takes precedence in the dispatch. Forced on
    (where the bank has a per-expert width) with
    :func:`~sci_moe.moe.set_grouped_path` ``("chunked")``; ``"grouped_mm"``, ``"bmm"`` and
    ``"per_expert"`` turn it off.

    Parameters
    ----------
    x : Tensor, shape (N, d_in)
        Rows of the layer's dtype and device (the sorted rows or the layer's input).
    plan : DispatchPlan
    experts : ExpertBank

    Returns
    -------
    bool

    Examples
    --------
    >>> from sci_moe.moe import GLUExperts, Routing
    >>> bank = GLUExperts(8, 128, 128)
    >>> top4 = Routing.from_assignments(torch.arange(4).repeat(4096, 1),
    ...                                 torch.ones(4096, 4), num_experts=8)
    >>> chunked_path(torch.zeros(1, 128), top4.plan, bank) == (
    ...     torch.backends.cpu.get_cpu_capability() == "AVX512")
    True
    """
    width = experts.per_expert_width
    forced = forced_path()
    if width is None or x.device.type != "cpu" or forced in ("grouped_mm", "bmm", "per_expert"):
        return False
    if forced == "chunked":
        return True
    return (
        torch.backends.cpu.get_cpu_capability() == _CHUNK_CPU_CAPABILITY
        and x.dtype == torch.float32
        and width <= _CHUNK_MAX_WIDTH
        and plan.num_kept >= _CHUNK_MIN_ROWS
    )


def chunked_forward(
    x: torch.Tensor,
    plan: DispatchPlan,
    weights: tuple[torch.Tensor, torch.Tensor],
    inner,
    width: int,
    budget: int | None = None,
) -> torch.Tensor:
    """``y[r] = W2_e inner(W1_e x[r])`` on sorted rows, chunk by chunk of experts.

    Parameters
    ----------
    x : Tensor, shape (N, d_in)
        Rows sorted by expert (``N = plan.num_kept``).
    plan : DispatchPlan
    weights : (Tensor, Tensor)
        The stacked ``(E, w, d_in)`` first and ``(E, d_out, w')`` second weights.
    inner : callable
        ``(n, w) -> (n, w')``, e.g. the GLU product.
    width : int
        ``w``: the chunks hold at most ``budget`` bytes of ``(rows, w)``
        (:func:`expert_chunks`).
    budget : int, optional
        Bytes per chunk (default: the measured rule's 2 MiB).

    Returns
    -------
    Tensor, shape (N, d_out)

    Notes
    -----
    The rows and both weights are ``split`` into the chunks (views; their backward is one
    ``cat`` each), each chunk's GEMMs take the automatic path of
    :meth:`~sci_moe.moe.ExpertBank.grouped_linear`, and the outputs are concatenated. All steps are
    differentiable, so double backward works as on the sorted path.
    """
    first, second = weights
    budget = _CHUNK_BYTES if budget is None else budget
    counts = plan.counts.tolist()
    chunks = expert_chunks(counts, width * x.element_size(), budget)
    if len(chunks) == 1:
        offsets = plan.offsets
        return grouped_linear(
            inner(grouped_linear(x, first, plan.counts, offsets)), second, plan.counts, offsets
        )
    sizes = [e1 - e0 for e0, e1, _, _ in chunks]
    parts = zip(
        chunks,
        x.split([r1 - r0 for _, _, r0, r1 in chunks]),
        first.split(sizes),
        second.split(sizes),
        strict=True,
    )
    outs = []
    for (e0, e1, _, _), xc, w1, w2 in parts:
        chunk_counts = torch.tensor(counts[e0:e1], dtype=torch.int64)
        offsets = chunk_counts.cumsum(0).to(torch.int32)
        h = inner(grouped_linear(xc, w1, chunk_counts, offsets))
        outs.append(grouped_linear(h, w2, chunk_counts, offsets))
    return torch.cat(outs)
