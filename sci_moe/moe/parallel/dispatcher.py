"""The expert-parallel dispatch strategy: experts sharded over ranks, all-to-all of rows."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..dispatchers import Dispatcher
from ..expert_ops import slice_experts, stacked_names
from ..permute import combine_by_token, gather_by_expert
from ..routing import Routing, make_plan
from .comm import all_to_all_rows, exchange_counts

__all__ = ["ExpertParallel"]


def _require_dist() -> None:
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "torch.distributed is not initialised: call "
            "torch.distributed.init_process_group(...) first (e.g. under torchrun)"
        )


class ExpertParallel(Dispatcher):
    """Dispatch strategy: the routed experts are sharded over a process group.

    ``MoE(..., dispatcher=ExpertParallel(group))`` (or :func:`expert_parallel` on an
    existing layer) keeps on rank ``r`` of ``W`` the experts ``[r E/W, (r + 1) E/W)`` as
    a local bank of the same kind; router, shared experts, Default-MoE EMA and any
    nested module of the bank (LoRA's frozen base) are replicated. Each rank routes its
    own tokens; rows travel to the rank owning their expert and back:

    1. sort the ``(token, slot)`` assignments by global expert (hence by rank);
    2. all-to-all of the per-expert counts; the per-rank split sizes are copied to the
       host (one synchronisation per call);
    3. differentiable all-to-all of the rows (:func:`all_to_all_rows`, uneven splits);
    4. regroup the received rows (``[source rank][local expert]``) by local expert and
       run the local bank's grouped forward;
    5. undo the regrouping, reverse all-to-all, weighted sum over the top-k slots.

    Batch-level decisions and statistics are taken over the whole batch of the group:
    expert-choice selection and capacity dropping gather the (detached) scores or
    indices of all ranks, Default MoE's EMA all-reduces its per-expert sums, and with
    ``global_batch_balance=True`` every auxiliary loss is that of the global batch. So
    each rank's output equals that of the single-process layer on the concatenation of
    all ranks' tokens, for every option of the layer.

    Gradients: after ``backward`` each expert-slice gradient is that of the **sum** of
    all ranks' losses (the reverse all-to-all delivers them); replicated parameters only
    see the local loss: call :func:`sync_replicated_grads` or wrap them in DDP (see
    ``docs/parallel.rst``).

    Parameters
    ----------
    process_group : ProcessGroup, optional
        Default: the world group. ``torch.distributed`` must be initialised when a layer
        adopts the dispatcher.

    Examples
    --------
    On every rank, after ``dist.init_process_group``::

        torch.manual_seed(0)  # the same full layer on every rank
        moe = MoE(d_model=64, num_experts=8, top_k=2, dispatcher=ExpertParallel())
        y = moe(x_local)
        y.square().mean().backward()
        sync_replicated_grads(moe)
    """

    shards_experts = True

    def __init__(self, process_group: dist.ProcessGroup | None = None) -> None:
        _require_dist()
        self.process_group = process_group
        self.rank = dist.get_rank(process_group)
        self.world_size = dist.get_world_size(process_group)

    def __repr__(self) -> str:
        return f"ExpertParallel(rank={self.rank}, world_size={self.world_size})"

    # -- layer set-up ------------------------------------------------------------------

    def attach(self, moe: nn.Module) -> None:
        """Check the layer and keep this rank's slice of a full bank (in place)."""
        W, E = self.world_size, moe.router.num_experts
        if E % W:
            raise ValueError(
                f"num_experts={E} is not divisible by the {W} ranks of the process group; "
                "choose E as a multiple of the expert-parallel world size"
            )
        L = E // W
        bank = moe.experts
        if bank.num_experts == E and L != E:
            moe.experts = slice_experts(bank, self.rank * L, (self.rank + 1) * L)
        elif bank.num_experts != L:
            raise ValueError(
                f"the bank has {bank.num_experts} experts but the router's {E} experts over "
                f"{W} ranks give {L} per rank; pass the full bank or build it with "
                "slice_experts"
            )
        stacked_names(moe.experts)  # every direct tensor stacked, or TypeError

    def expert_range(self, moe: nn.Module) -> tuple[int, int]:
        """Global ids ``(start, stop)`` of the experts ``moe`` holds on this rank."""
        L = moe.experts.num_experts
        return self.rank * L, (self.rank + 1) * L

    def sharded_tensors(self, moe: nn.Module) -> list[torch.Tensor]:
        """The parameters and buffers of ``moe`` that differ between ranks (bank slices)."""
        return [getattr(moe.experts, n) for n in stacked_names(moe.experts)]

    # -- batch-level statistics ----------------------------------------------------------

    def reduce_batch(self, t: torch.Tensor) -> torch.Tensor:
        """All-reduce (sum) of ``t`` over the group, without autograd."""
        out = t.detach().clone()
        dist.all_reduce(out, group=self.process_group)
        return out

    def gather_rows(self, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        """All ranks' rows of ``t`` (uneven counts) in rank order, and this rank's offset."""
        n = torch.tensor([t.shape[0]], dtype=torch.long, device=t.device)
        sizes = [torch.zeros_like(n) for _ in range(self.world_size)]
        dist.all_gather(sizes, n, group=self.process_group)
        sizes = [int(s) for s in sizes]
        width = max(sizes)
        padded = t.detach().new_zeros((width, *t.shape[1:]))
        padded[: t.shape[0]] = t.detach()
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded.contiguous(), group=self.process_group)
        rows = torch.cat([p[:s] for p, s in zip(parts, sizes, strict=True)])
        return rows, sum(sizes[: self.rank])

    def route(self, router: nn.Module, x: torch.Tensor) -> Routing:
        """Route this rank's tokens; batch decisions over the whole group."""
        if getattr(router, "batch_decisions", False):
            return router(x, batch=self)
        return router(x)

    # -- dispatch ------------------------------------------------------------------------

    def __call__(self, x, routing, experts, return_expert_outputs=False):
        """Routed part with experts on their owner ranks (a collective).

        ``x`` ``(T, d_in)`` -> ``(T, d_out)``; with ``return_expert_outputs`` also the
        unweighted outputs in the routing's plan order, as :func:`~sci_moe.moe.dispatch`.
        """
        W, L, group = self.world_size, experts.num_experts, self.process_group
        T = x.shape[0]
        if routing.num_experts != W * L or routing.num_tokens != T:
            raise ValueError(
                f"routing is for {routing.num_tokens} tokens over {routing.num_experts} "
                f"experts, but x has {T} tokens and the sharded bank {W} x {L} experts"
            )
        plan = routing.plan
        # 1. rows sorted by global expert, i.e. grouped by destination rank.
        xs = _gather(x, plan)  # (n_send, d_in)
        # 2. counts: recv_counts[s * L + l] = rows from rank s for local expert l.
        recv_counts = exchange_counts(plan.counts, group)
        sizes = torch.stack([plan.counts.view(W, L).sum(1), recv_counts.view(W, L).sum(1)])
        send_splits, recv_splits = sizes.tolist()  # the one host sync
        n_recv = sum(recv_splits)
        # 3. dispatch rows to the ranks owning their experts.
        xr = all_to_all_rows(xs, recv_splits, send_splits, group)  # (n_recv, d_in)
        # 4. regroup by local expert (stable: source rank order kept inside an expert,
        #    the same row order as the single-process layer on the concatenated batch).
        local_ids = torch.arange(L, device=x.device).repeat(W)
        local_expert = torch.repeat_interleave(local_ids, recv_counts, output_size=n_recv)
        local_plan = make_plan(local_expert.unsqueeze(1), L)
        yl = experts.forward_sorted(_gather(xr, local_plan), local_plan)
        if n_recv == 0 and xr.requires_grad and not yl.requires_grad:
            # An empty bank output is a fresh tensor; keep it in the graph so this rank
            # still joins the backward all-to-all of step 3.
            yl = yl + xr.sum()
        yr = _Permute.apply(yl, local_plan.inverse, local_plan.order)  # (n_recv, d_out)
        # 5. send the outputs back and combine them per token.
        ys = all_to_all_rows(yr, send_splits, recv_splits, group)  # (n_send, d_out)
        if T == 0:
            y = ys
        else:
            w = routing.weights.reshape(-1)[plan.order[: plan.num_kept]].to(ys.dtype)
            y = combine_by_token(ys, w, plan, T)
        return (y, ys) if return_expert_outputs else y


def _gather(x: torch.Tensor, plan) -> torch.Tensor:
    """:func:`gather_by_expert`; with no rows, ``x`` itself (its backward needs T > 0)."""
    return x if x.shape[0] == 0 else gather_by_expert(x, plan)


class _Permute(torch.autograd.Function):
    """``x[index]`` for a permutation, with the gather ``grad[inverse]`` as backward."""

    @staticmethod
    def forward(ctx, x, index, inverse):
        ctx.save_for_backward(inverse)
        return x[index]

    @staticmethod
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        return grad[inverse], None, None
