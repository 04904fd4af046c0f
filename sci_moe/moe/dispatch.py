"""Sort-based dispatch: gather rows by expert, run a bank, weighted deterministic combine."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .experts import ExpertBank
from .grouped import forced_path
from .permute import combine_by_token, gather_by_expert
from .routing import DispatchPlan, Routing

__all__ = ["dispatch", "per_expert_path"]

# Measured size rule of the per-expert loop (one core of an AVX-512 Intel Xeon, float32 and
# bfloat16 SwiGLU banks; interleaved whole-layer A/B and the grid's forced-path column,
# benchmarks/moe_layer/results/moe_layer_grid_loop.json, docs/results/moe_layer.rst): glibc serves
# every tensor of 32 MiB and more (its largest mmap threshold) with fresh pages, so each
# step page-faults the ``(T k, 2 d_hidden)`` intermediates of the sorted path anew; the
# loop's per-expert tensors are ``E`` times smaller and come from the heap. It won
# (1.09-1.42x) where those intermediates reach 32 MiB and each expert's share reaches
# 2 MiB with >= 512 rows; with smaller shares it lost or tied (0.78-0.90x at 0.5-1 MiB
# per expert, d = 256, E = 32-64; 0.47x at 64 rows of d = 1024: the per-expert weight
# gradients are stacked afterwards, and each expert costs a few Python-level calls).
_PER_EXPERT_MIN_BYTES = 32 * 2**20
_PER_EXPERT_MIN_SHARE = 2 * 2**20
_PER_EXPERT_MIN_ROWS = 512


def per_expert_path(x: torch.Tensor, plan: DispatchPlan, experts: ExpertBank) -> bool:
    """Whether :func:`dispatch` runs ``experts`` as a loop over experts.

    The loop gathers each expert's rows, applies that expert
    (:meth:`~sci_moe.moe.ExpertBank.expert_functions`) and adds its weighted output
    into the ``(T, d_out)`` result (``index_add_``), expert by expert, instead of one
    grouped GEMM per weight over all ``N = T k`` sorted rows. Taken on the CPU for banks
    with a :attr:`~sci_moe.moe.ExpertBank.per_expert_width` ``w`` (SwiGLU/GeGLU:
    ``2 d_hidden``) when the sorted path's ``(N, w)`` intermediate has at least 32 MiB
    (``N w itemsize >= 2^25`` bytes: above glibc's largest mmap threshold, fresh pages
    every step) and each expert's share of it at least 2 MiB with at least 512 rows on
    average (``N w itemsize >= 2^21 E``, ``N >= 512 E``). Forced on
    (where the bank has a loop) or off with :func:`~sci_moe.moe.set_grouped_path`
    (``"per_expert"``; ``"grouped_mm"``, ``"bmm"`` and ``"chunked"`` keep the sorted
    path). Where the loop is not taken, large float32 banks may still run the sorted
    path in chunks of experts (:func:`~sci_moe.moe.chunked_path`).

    Parameters
    ----------
    x : Tensor, shape (T, d_in)
        The layer's input rows.
    plan : DispatchPlan
    experts : ExpertBank

    Returns
    -------
    bool

    Examples
    --------
    >>> from sci_moe.moe import GLUExperts, Routing
    >>> bank = GLUExperts(8, 256, 256)
    >>> x = torch.zeros(4096, 256)
    >>> top8 = Routing.from_assignments(torch.arange(8).repeat(4096, 1),
    ...                                 torch.ones(4096, 8), num_experts=8)
    >>> top1 = Routing.from_assignments(torch.arange(4096).remainder(8).view(-1, 1),
    ...                                 torch.ones(4096, 1), num_experts=8)
    >>> per_expert_path(x, top8.plan, bank), per_expert_path(x, top1.plan, bank)
    (True, False)
    """
    width = experts.per_expert_width
    forced = forced_path()
    if width is None or x.device.type != "cpu" or forced in ("grouped_mm", "bmm", "chunked"):
        return False
    if forced == "per_expert":
        return True
    n, E = plan.num_kept, experts.num_experts
    nbytes = n * width * x.element_size()
    return (
        nbytes >= _PER_EXPERT_MIN_BYTES
        and nbytes >= _PER_EXPERT_MIN_SHARE * E
        and n >= _PER_EXPERT_MIN_ROWS * E
    )


def _per_expert(x, w, plan, fns, num_tokens, d_out):
    """``y[t] = sum_r w_r f_{e(r)}(x[token[r]])``, one expert at a time (see above).

    ``d_out`` is an int, or a callable giving it (asked only when no row is kept).
    """
    y = None
    start = 0
    for e, count in enumerate(plan.counts.tolist()):
        if count == 0:
            continue
        stop = start + count
        token = plan.token[start:stop]
        rows = fns[e](x.index_select(0, token)) * w[start:stop, None]
        if y is None:
            y = rows.new_zeros(num_tokens, rows.shape[1])
        y.index_add_(0, token, rows)
        start = stop
    if y is None:
        return x.new_zeros(num_tokens, d_out if isinstance(d_out, int) else d_out())
    return y


def dispatch(
    x: torch.Tensor,
    routing: Routing,
    experts: ExpertBank | Sequence[nn.Module],
    return_expert_outputs: bool = False,
    *,
    include_base: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Apply a routed expert bank: ``y_t = base(x_t) + sum_j w_tj * E_{i_tj}(x_t)``.

    ``base`` is the bank's ungated term (:meth:`ExpertBank.base`, e.g. the frozen
    ``W0 x + b0`` of :class:`~sci_moe.moe.LoRAExperts`; nothing for the other built-in
    banks), so ``dispatch(x, routing, bank)`` is the whole bank output, the same as the
    routed part of :class:`~sci_moe.moe.MoE`.

    Parameters
    ----------
    x : Tensor, shape (T, d_in)
    routing : Routing
        For the same ``T`` tokens; ``routing.num_experts`` must equal the bank's. A
        gather routing (:attr:`Routing.source <sci_moe.moe.Routing.source>` set, a tree
        level) reads the rows ``x[source]`` of the candidate rows ``x``.
    experts : ExpertBank or sequence of nn.Module
        A bank, or ``E`` expert modules (e.g. an ``nn.ModuleList`` of whole networks,
        each ``(n, d_in) -> (n, d_out)``), run one expert at a time on its rows (the
        loop of :func:`per_expert_path`; no base term, no expert outputs).
    return_expert_outputs : bool
        Also return the unweighted expert outputs in expert order (what Default MoE's
        EMA and the orthogonality loss need).
    include_base : bool
        Add the bank's :meth:`~ExpertBank.base` term (default). ``False`` gives only the
        routed sum (what a layer that adds the base itself, once, needs).

    Returns
    -------
    y : Tensor, shape (T, d_out)
    expert_outputs : Tensor, shape (routing.plan.num_kept, d_out)
        Only with ``return_expert_outputs=True``; row ``r`` is
        ``E_{plan.expert[r]}(x[plan.token[r]])``.

    Notes
    -----
    Steps: (1) the routing's cached plan sorts the ``T k`` assignments by expert;
    (2) ``x[token]`` gathers rows in that order; (3) the bank runs one grouped GEMM per
    weight; (4) rows are scaled by their weights, put back in ``(token, slot)`` order
    with the inverse permutation and summed over slots with ``view(T, k, d).sum(1)``.
    Forward and backward of (2) and (4) only gather (see :mod:`sci_moe.moe.permute`),
    so the layer is deterministic on every device. On the CPU, for large ``T k`` with
    few experts, steps (2)-(4) run as a loop over experts instead
    (:func:`per_expert_path`, a measured size rule; not with
    ``return_expert_outputs``); its sums run in the same order. Step (3) of a GLU bank
    may run in cache-sized chunks of experts (:func:`~sci_moe.moe.chunked_path`).

    A routing marked :attr:`Routing.single_expert <sci_moe.moe.Routing.single_expert>`
    (every token to one expert ``e`` with weight 1, e.g. :meth:`Routing.one_expert
    <sci_moe.moe.Routing.one_expert>`) skips steps (1)-(4): ``y = E_e(x)``
    (:meth:`~ExpertBank.forward_expert`), times the weights only where they require
    grad, so their gradient ``<dy_t, E_e(x_t)>`` still flows. The same values as the
    general path (whose combine multiplies by exactly 1 and sums one slot) up to the
    rounding of the expert's own GEMMs (one plain GEMM instead of a grouped one). The
    mark is read, not checked, so the shortcut costs no host sync; unmarked routings
    (every router's) take the general path.
    """
    if not isinstance(experts, ExpertBank):
        return _dispatch_modules(x, routing, experts, return_expert_outputs)
    if routing.num_experts != experts.num_experts:
        raise ValueError(
            f"routing is for {routing.num_experts} experts but the bank has "
            f"{experts.num_experts}; route with a router of the same size"
        )
    if routing.single_expert is not None:
        x, ys = _single_expert(x, routing, lambda e, rows: experts.forward_expert(e, rows))
        y = _times_weights(ys, routing.weights)
    else:
        y, ys, x = _routed(x, routing, experts, return_expert_outputs)
    if include_base:
        base = experts.base(x)
        if base is not None:
            y = y + base
    return (y, ys) if return_expert_outputs else y


def _routed(x, routing, experts, return_expert_outputs):
    """The general path of :func:`dispatch`: ``(y, expert outputs or None, rows)``."""
    ys = None
    x, T, plan, w = _routed_rows(x, routing)
    if not return_expert_outputs and per_expert_path(x, plan, experts):
        y = _per_expert(x, w.to(x.dtype), plan, experts.expert_functions(), T, experts.d_out)
    else:
        ys = experts.forward_sorted(gather_by_expert(x, plan), plan)
        y = combine_by_token(ys, w.to(ys.dtype), plan, T)
    return y, ys, x


def _covered_rows(x, routing):
    """The rows ``routing`` covers (``x[routing.source]`` for a gather routing)."""
    T = routing.indices.shape[0]
    if routing.source is not None:
        x = x[routing.source]
    if x.shape[0] != T:
        raise ValueError(f"routing covers {T} tokens but x has {x.shape[0]} rows")
    return x


def _routed_rows(x, routing):
    """The rows ``routing`` covers, its token count, plan and kept weights (sorted order).

    A gather routing (a tree level) reads rows ``x[routing.source]``.
    """
    x = _covered_rows(x, routing)
    plan = routing.plan
    return x, x.shape[0], plan, routing.weights.reshape(-1)[plan.order[: plan.num_kept]]


def _single_expert(x, routing, run):
    """Rows and unweighted outputs ``run(e, rows)`` of a :attr:`Routing.single_expert` routing.

    The outputs are also the expert outputs in plan order (its order is the identity).
    """
    x = _covered_rows(x, routing)
    return x, run(routing.single_expert, x)


def _times_weights(ys, weights):
    """``ys * weights`` (``(T, 1)``) where the weights require grad, else ``ys``.

    The weights of a single-expert routing are exactly 1: the product is ``ys`` itself,
    bit for bit, and is only formed so that autograd reaches the weights.
    """
    if weights.requires_grad:
        return ys * weights.to(ys.dtype)
    return ys


def _dispatch_modules(x, routing, experts, return_expert_outputs):
    """:func:`dispatch` over a container of expert modules (one call per used expert)."""
    experts = list(experts)
    if not all(isinstance(m, nn.Module) for m in experts):
        raise TypeError(
            "experts must be an ExpertBank or a sequence of nn.Module (e.g. nn.ModuleList)"
        )
    if routing.num_experts != len(experts):
        raise ValueError(
            f"routing is for {routing.num_experts} experts but {len(experts)} expert "
            "modules were given"
        )
    if return_expert_outputs:
        raise ValueError("return_expert_outputs needs an ExpertBank, not expert modules")
    if routing.single_expert is not None:
        _, ys = _single_expert(x, routing, lambda e, rows: experts[e](rows))
        return _times_weights(ys, routing.weights)
    x, T, plan, w = _routed_rows(x, routing)
    return _per_expert(x, w.to(x.dtype), plan, experts, T, lambda: experts[0](x[:0]).shape[-1])
