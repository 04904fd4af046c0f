"""The expert-parallel MoE layer: replicated router, experts sharded over ranks."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from ..experts import ExpertBank
from ..layer import MoE, MoEInfo, auxiliary_losses, check_layer_input
from ..permute import combine_by_token, gather_by_expert
from ..router import Router
from ..routing import Routing, make_plan
from .comm import all_to_all_rows, exchange_counts

__all__ = ["ExpertParallelMoE", "slice_experts"]


def _stacked_names(bank: ExpertBank) -> list[str]:
    """Direct parameters and buffers of ``bank`` (its stacked per-expert tensors)."""
    names = [n for n, _ in bank.named_parameters(recurse=False)]
    names += [n for n, _ in bank.named_buffers(recurse=False)]
    return names


def _check_stacked(bank: ExpertBank, num_experts: int) -> list[str]:
    names = _stacked_names(bank)
    for name in names:
        t = getattr(bank, name)
        if t is not None and (t.dim() == 0 or t.shape[0] != num_experts):
            raise TypeError(
                f"{type(bank).__name__}.{name} has shape {tuple(t.shape)}, not "
                f"({num_experts}, ...): expert parallelism needs every direct parameter "
                "and buffer of the bank stacked over experts (nested modules are "
                "replicated)"
            )
    return names


def slice_experts(bank: ExpertBank, start: int, stop: int) -> ExpertBank:
    """A bank holding experts ``[start, stop)`` of ``bank`` (a copy; ``bank`` is unchanged).

    Every direct parameter and buffer of the bank (``weight``, ``gate_up``, ``down``,
    biases, ``lora_a``...) is stacked over experts and sliced along dim 0; nested modules
    (e.g. the frozen base layer of :class:`~sci_moe.moe.LoRAExperts`) are copied whole.
    The full stacked tensors are not copied.

    Parameters
    ----------
    bank : ExpertBank
        With ``E`` experts.
    start, stop : int
        ``0 <= start < stop <= E``.

    Returns
    -------
    ExpertBank
        Same class, ``stop - start`` experts.
    """
    E = bank.num_experts
    if not 0 <= start < stop <= E:
        raise ValueError(f"need 0 <= start < stop <= {E}, got start={start}, stop={stop}")
    names = _check_stacked(bank, E)
    memo = {}
    for name in names:
        t = getattr(bank, name)
        if t is None:
            continue
        piece = t.detach()[start:stop].clone()
        if isinstance(t, nn.Parameter):
            piece = nn.Parameter(piece, requires_grad=t.requires_grad)
        # deepcopy returns memo[id(obj)] for obj: the slice takes the full tensor's place.
        memo[id(t)] = piece
    local = copy.deepcopy(bank, memo)
    local.num_experts = stop - start
    return local


def _check_router(router: Router) -> None:
    c = router.config
    if c.mode == "expert_choice":
        raise ValueError(
            "ExpertParallelMoE does not support expert-choice routing: its per-expert "
            "capacity is a decision over the whole (global) batch; use mode='topk'"
        )
    if c.capacity_factor is not None:
        raise ValueError(
            "ExpertParallelMoE is dropless and does not support capacity_factor "
            f"(got {c.capacity_factor}): capacity dropping is a decision over the whole "
            "batch; set capacity_factor=None"
        )


class ExpertParallelMoE(nn.Module):
    """MoE layer whose routed experts are sharded over the ranks of a process group.

    Rank ``r`` of ``W`` holds experts ``[r E/W, (r + 1) E/W)`` as a local bank of the
    same kind; the router and the shared experts are replicated. Each rank routes its
    own tokens; rows travel to the rank owning their expert and back:

    1. route locally and sort the ``(token, slot)`` assignments by global expert (hence
       by destination rank);
    2. all-to-all of the per-expert counts; the per-rank split sizes are copied to the
       host (one synchronisation per call);
    3. differentiable all-to-all of the rows (:func:`all_to_all_rows`, uneven splits);
    4. regroup the received rows (ordered ``[source rank][local expert]``) by local
       expert and run the local bank's grouped forward;
    5. undo the regrouping, reverse all-to-all, weighted sum over the top-k slots, add
       the shared experts.

    The output on each rank equals that of the single-process :class:`~sci_moe.moe.MoE`
    with the same weights on the concatenation of all ranks' tokens. Gradients: the
    reverse all-to-all in backward delivers every rank's contributions to the expert
    weights, so after ``backward`` each expert gradient is the gradient of the **sum**
    of all ranks' losses. Replicated parameters (router, shared experts) only see the
    local loss: call :func:`sync_replicated_grads` (an explicit all-reduce, no hook) or
    wrap the non-expert parameters in DDP (see ``docs/parallel.rst``).

    Supported: token-choice top-k routing (softmax or sigmoid, selection bias, group
    limiting) and dense gating, dropless. Not supported (``ValueError``): expert-choice
    routing and capacity dropping, which are decisions over the global batch.

    Parameters
    ----------
    router : Router
        Routes over all ``E`` experts; identical on every rank.
    experts : ExpertBank
        This rank's ``E / W`` experts (see :func:`slice_experts`).
    shared : nn.Module, optional
        Replicated always-on experts, ``(T, d_model) -> (T, d_model)``.
    process_group : ProcessGroup, optional
        The expert-parallel group (default: the world group). Must be initialised.
    load_balance_coef, z_loss_coef : float
        As in :class:`~sci_moe.moe.MoEConfig`.
    global_batch_balance : bool
        All-reduce the balancing statistics over ``process_group``.
    check_finite : bool
        Raise on NaN/Inf inputs.

    Attributes
    ----------
    rank, world_size : int
        Position in and size of ``process_group``.

    Examples
    --------
    On every rank, after ``dist.init_process_group``::

        torch.manual_seed(0)  # same full layer on every rank
        ep = ExpertParallelMoE.from_moe(MoE(d_model=64, num_experts=8, top_k=2))
        y = ep(x_local)  # (..., 64)
        y.square().mean().backward()
        sync_replicated_grads(ep)
    """

    def __init__(
        self,
        router: Router,
        experts: ExpertBank,
        shared: nn.Module | None = None,
        process_group: dist.ProcessGroup | None = None,
        *,
        load_balance_coef: float = 0.01,
        z_loss_coef: float = 0.0,
        global_batch_balance: bool = False,
        check_finite: bool = True,
    ) -> None:
        super().__init__()
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError(
                "torch.distributed is not initialised: call "
                "torch.distributed.init_process_group(...) first (e.g. under torchrun)"
            )
        _check_router(router)
        if load_balance_coef < 0 or z_loss_coef < 0:
            raise ValueError("loss coefficients must be >= 0")
        W = dist.get_world_size(process_group)
        E, L = router.num_experts, experts.num_experts
        if E % W:
            raise ValueError(
                f"num_experts={E} is not divisible by the {W} ranks of the process group; "
                "choose E as a multiple of the expert-parallel world size"
            )
        if L * W != E:
            raise ValueError(
                f"the local bank has {L} experts but the router's {E} experts over "
                f"{W} ranks give {E // W} per rank; build it with slice_experts"
            )
        if router.config.d_model != experts.d_in:
            raise ValueError(
                f"router expects d_model={router.config.d_model} "
                f"but the bank's d_in is {experts.d_in}"
            )
        self._expert_names = _check_stacked(experts, L)
        self.router, self.experts, self.shared = router, experts, shared
        self.process_group = process_group
        self.rank, self.world_size = dist.get_rank(process_group), W
        self.d_model = experts.d_in
        self.load_balance_coef, self.z_loss_coef = load_balance_coef, z_loss_coef
        self.global_batch_balance = global_batch_balance
        self.check_finite = check_finite

    @classmethod
    def from_moe(
        cls, moe: MoE, process_group: dist.ProcessGroup | None = None
    ) -> ExpertParallelMoE:
        """Shard a full single-process layer: keep this rank's slice of the experts.

        The router and shared experts are copied; the local bank holds experts
        ``[r E/W, (r + 1) E/W)`` (:func:`slice_experts`). ``moe`` must be identical on all
        ranks (same seed or a broadcast state dict) and is left unchanged.

        Parameters
        ----------
        moe : MoE
        process_group : ProcessGroup, optional

        Returns
        -------
        ExpertParallelMoE
        """
        if not isinstance(moe, MoE):
            raise TypeError(f"from_moe needs an MoE, got {type(moe).__name__}")
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError(
                "torch.distributed is not initialised: call "
                "torch.distributed.init_process_group(...) first (e.g. under torchrun)"
            )
        _check_router(moe.router)
        W, r = dist.get_world_size(process_group), dist.get_rank(process_group)
        E = moe.num_experts
        if E % W:
            raise ValueError(
                f"num_experts={E} is not divisible by the {W} ranks of the process group; "
                "choose E as a multiple of the expert-parallel world size"
            )
        L = E // W
        return cls(
            copy.deepcopy(moe.router),
            slice_experts(moe.experts, r * L, (r + 1) * L),
            copy.deepcopy(moe.shared),
            process_group,
            load_balance_coef=moe.load_balance_coef,
            z_loss_coef=moe.z_loss_coef,
            global_batch_balance=moe.global_batch_balance,
            check_finite=moe.check_finite,
        )

    @property
    def num_experts(self) -> int:
        """Global number of routed experts ``E``."""
        return self.router.num_experts

    @property
    def num_local_experts(self) -> int:
        """Experts held by this rank, ``E / W``."""
        return self.experts.num_experts

    @property
    def top_k(self) -> int:
        """Experts per token ``k``."""
        return self.router.top_k

    @property
    def expert_range(self) -> tuple[int, int]:
        """Global ids ``(start, stop)`` of the local experts."""
        L = self.num_local_experts
        return self.rank * L, (self.rank + 1) * L

    def extra_repr(self) -> str:
        start, stop = self.expert_range
        return (
            f"rank={self.rank}, world_size={self.world_size}, "
            f"experts=[{start}, {stop}) of {self.num_experts}"
        )

    def expert_parameters(self):
        """The sharded (per-rank) parameters: the local bank's stacked weights."""
        for name in self._expert_names:
            t = getattr(self.experts, name)
            if isinstance(t, nn.Parameter):
                yield t

    def expert_buffers(self):
        """The sharded buffers of the local bank (none for the built-in banks)."""
        params = {id(p) for p in self.expert_parameters()}
        for name in self._expert_names:
            t = getattr(self.experts, name)
            if t is not None and id(t) not in params:
                yield t

    # -- checkpoints ---------------------------------------------------------------

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """State dict of the equivalent single-process :class:`~sci_moe.moe.MoE`.

        The local expert slices are all-gathered along dim 0 (a collective: call it on
        every rank). Load it with ``MoE.load_state_dict`` or :meth:`load_full_state_dict`.
        """
        sd = self.state_dict()
        for name in self._expert_names:
            key = f"experts.{name}"
            if key not in sd:
                continue
            local = sd[key].contiguous()
            parts = [torch.empty_like(local) for _ in range(self.world_size)]
            dist.all_gather(parts, local, group=self.process_group)
            sd[key] = torch.cat(parts)
        return sd

    def load_full_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load a single-process layer's state dict, keeping this rank's expert slice."""
        start, stop = self.expert_range
        sd = dict(state_dict)
        for name in self._expert_names:
            key = f"experts.{name}"
            if key in sd:
                full = sd[key]
                if full.shape[0] != self.num_experts:
                    raise ValueError(
                        f"{key} has {full.shape[0]} experts, expected {self.num_experts}"
                    )
                sd[key] = full[start:stop]
        self.load_state_dict(sd)

    # -- forward ---------------------------------------------------------------------

    def _check_input(self, x: torch.Tensor) -> None:
        check_layer_input(x, self.d_model, self.check_finite)

    def route(self, x: torch.Tensor) -> Routing:
        """Route this rank's ``x`` of shape ``(..., d_model)`` (flattened to ``(T, d)``)."""
        self._check_input(x)
        return self.router(x.reshape(-1, self.d_model))

    def forward(
        self,
        x: torch.Tensor,
        routing: Routing | None = None,
        return_routing: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, MoEInfo]:
        """Apply the layer to this rank's tokens (a collective: every rank must call it).

        Parameters
        ----------
        x : Tensor, shape (..., d_model)
            This rank's tokens; the number of tokens may differ between ranks (even 0).
        routing : Routing, optional
            Over the global ``E`` experts for these tokens; computed when omitted.
        return_routing : bool
            Also return an :class:`~sci_moe.moe.MoEInfo` (local routing; losses of the
            local batch, or of the global batch with ``global_batch_balance``).

        Returns
        -------
        y : Tensor, shape (..., d_out)
        info : MoEInfo
            Only with ``return_routing=True``.
        """
        self._check_input(x)
        shape = x.shape
        x2 = x.reshape(-1, self.d_model)
        if routing is None:
            routing = self.router(x2)
        elif routing.num_experts != self.num_experts or routing.num_tokens != x2.shape[0]:
            raise ValueError(
                f"routing is for {routing.num_tokens} tokens over {routing.num_experts} "
                f"experts, but x has {x2.shape[0]} tokens and the layer {self.num_experts}"
            )
        y = self._dispatch(x2, routing)
        base = self.experts.base(x2)
        if base is not None:
            y = y + base
        if self.shared is not None:
            y = y + self.shared(x2)
        y = y.to(x.dtype).reshape(*shape[:-1], y.shape[-1])
        if not return_routing:
            return y
        losses, aux = auxiliary_losses(
            routing,
            self.load_balance_coef,
            self.z_loss_coef,
            global_batch=self.global_batch_balance,
            process_group=self.process_group,
        )
        return y, MoEInfo(routing, losses, aux)

    def _dispatch(self, x: torch.Tensor, routing: Routing) -> torch.Tensor:
        """Routed part ``sum_j w_tj E_{i_tj}(x_t)`` with experts on their owner ranks.

        ``x`` : (T, d_in) -> (T, d_out).
        """
        W, L, group = self.world_size, self.num_local_experts, self.process_group
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
        yl = self.experts.forward_sorted(_gather(xr, local_plan), local_plan)
        if n_recv == 0 and xr.requires_grad and not yl.requires_grad:
            # An empty bank output is a fresh tensor; keep it in the graph so this rank
            # still joins the backward all-to-all of step 3.
            yl = yl + xr.sum()
        yr = _Permute.apply(yl, local_plan.inverse, local_plan.order)  # (n_recv, d_out)
        # 5. send the outputs back and combine them per token.
        ys = all_to_all_rows(yr, send_splits, recv_splits, group)  # (n_send, d_out)
        T = x.shape[0]
        if T == 0:
            return ys
        w = routing.weights.reshape(-1)[plan.order[: plan.num_kept]].to(ys.dtype)
        return combine_by_token(ys, w, plan, T)

    @torch.no_grad()
    def update_router_bias(self, routing: Routing) -> None:
        """Aux-loss-free balancing step from the **global** load (a collective).

        The local :attr:`Routing.load` is all-reduced over the group first, so the
        replicated selection biases stay identical on every rank.
        """
        load = routing.load.clone()
        dist.all_reduce(load, group=self.process_group)
        self.router.update_bias(load)


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
