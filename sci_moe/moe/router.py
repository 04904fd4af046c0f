"""Routers: learned scores -> :class:`~sci_moe.moe.routing.Routing`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_int, check_real
from .gates import GATE_SCORES, gate_scores
from .routing import Routing

__all__ = ["Router", "RouterConfig"]

_SCORES = GATE_SCORES
_MODES = ("topk", "expert_choice", "dense")


@dataclass
class RouterConfig:
    """Options of a :class:`Router`. Every variant is an option, not a new class.

    Parameters
    ----------
    d_model : int
        Input feature size.
    num_experts : int
        Number of routed experts ``E``.
    top_k : int
        Experts per token (``mode="topk"``); for ``"expert_choice"`` the capacity is
        ``capacity_factor * T * top_k / E`` tokens per expert.
    score : {"softmax", "sigmoid", "norm_softplus"}
        Score function applied to the logits (:func:`~sci_moe.moe.gate_scores`): softmax
        over experts, independent sigmoids as in DeepSeek-V3, or the normalised softplus
        ``softplus(z) / (sum softplus(z) + 1e-9)`` of MoSES (Pan et al. 2025).
    mode : {"topk", "expert_choice", "dense"}
        Token-choice top-k, expert-choice with capacity (Zhou et al. 2022), or dense
        (soft) gating where every expert is used with its score as weight.
    normalize : bool
        Renormalise the selected weights to sum to one (Mixtral; Qwen3/OLMoE
        ``norm_topk_prob``).
    norm_eps : float
        Added to the denominator of the renormalisation (DeepSeek-V3 uses 1e-20).
    scaling : float
        Multiplies the final weights (DeepSeek-V3 ``routed_scaling_factor``).
    selection_bias : bool
        Keep a per-expert bias that is added to the scores **for selection only**
        (auxiliary-loss-free balancing, Wang et al. 2024 / DeepSeek-V3). Weights come
        from the unbiased scores. Update it with :meth:`Router.update_bias`.
    bias_update_rate : float
        Step ``gamma`` of the bias update ``b += gamma * sign(mean(load) - load)``.
    num_groups, topk_groups : int
        Group-limited routing (DeepSeek-V3): experts are split into ``num_groups``
        groups ranked by the sum of their two best scores; only the ``topk_groups``
        best groups may be selected. ``num_groups=1`` disables it.
    capacity_factor : float or None
        Expert capacity as a multiple of the balanced load. Required for
        ``"expert_choice"``; for ``"topk"`` it enables token dropping (Switch/GShard),
        ``None`` is dropless.
    jitter : float
        Multiplicative input jitter ``x * U(1 - jitter, 1 + jitter)`` for the router in
        training mode only (Switch; MegaBlocks ``moe_jitter_eps``).
    noise_std : float
        Standard deviation of Gaussian noise added to the logits in training mode only
        (noisy top-k, Shazeer et al. 2017, fixed scale).
    """

    d_model: int
    num_experts: int
    top_k: int = 2
    score: str = "softmax"
    mode: str = "topk"
    normalize: bool = True
    norm_eps: float = 0.0
    scaling: float = 1.0
    selection_bias: bool = False
    bias_update_rate: float = 1e-3
    num_groups: int = 1
    topk_groups: int = 1
    capacity_factor: float | None = None
    jitter: float = 0.0
    noise_std: float = 0.0

    def __post_init__(self) -> None:
        for name in ("d_model", "num_experts", "top_k", "num_groups", "topk_groups"):
            setattr(self, name, check_int(name, getattr(self, name)))
        for name in ("norm_eps", "scaling", "bias_update_rate", "jitter", "noise_std"):
            setattr(self, name, check_real(name, getattr(self, name)))
        if self.capacity_factor is not None:
            self.capacity_factor = check_real("capacity_factor", self.capacity_factor)
        if self.d_model < 1:
            raise ValueError(f"d_model must be >= 1, got {self.d_model}")
        if self.num_experts < 1:
            raise ValueError(f"num_experts must be >= 1, got {self.num_experts}")
        if self.score not in _SCORES:
            raise ValueError(f"score must be one of {_SCORES}, got {self.score!r}")
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {self.mode!r}")
        if self.mode == "dense":
            self.top_k = self.num_experts
        if not 1 <= self.top_k <= self.num_experts:
            raise ValueError(
                f"top_k={self.top_k} must be between 1 and num_experts={self.num_experts}; "
                "lower top_k or add experts"
            )
        if self.num_groups < 1 or self.num_experts % self.num_groups:
            raise ValueError(
                f"num_groups={self.num_groups} must divide num_experts={self.num_experts}"
            )
        if self.num_groups > 1:
            if not 1 <= self.topk_groups <= self.num_groups:
                raise ValueError(f"topk_groups must be in [1, num_groups], got {self.topk_groups}")
            per_group = self.num_experts // self.num_groups
            if self.top_k > self.topk_groups * per_group:
                raise ValueError(
                    f"top_k={self.top_k} exceeds the {self.topk_groups * per_group} experts "
                    "in the allowed groups; raise topk_groups"
                )
        if self.mode == "expert_choice" and self.capacity_factor is None:
            raise ValueError("expert_choice routing needs a capacity_factor (e.g. 1.0)")
        if self.capacity_factor is not None and self.capacity_factor <= 0:
            raise ValueError(f"capacity_factor must be > 0, got {self.capacity_factor}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {self.noise_std}")


class Router(nn.Module):
    """Linear router producing a :class:`~sci_moe.moe.routing.Routing`.

    ``logits = x W^T`` (computed in at least float32), ``s = softmax(logits)``,
    ``sigmoid(logits)`` or the normalised softplus (:func:`~sci_moe.moe.gate_scores`);
    selection on ``s + b`` (``b`` the optional selection bias, with
    optional group limiting); weights ``w = s[selected]``, optionally renormalised and
    scaled.

    Parameters
    ----------
    config : RouterConfig
        See :class:`RouterConfig`; keyword arguments build one when omitted.

    Attributes
    ----------
    weight : Parameter, shape (E, d_model)
        Router projection (``nn.Linear`` layout, no bias).
    expert_bias : Tensor, shape (E,), float32 buffer
        Selection-only bias (used when ``selection_bias=True``); saved in ``state_dict``.

    Examples
    --------
    >>> router = Router(d_model=16, num_experts=4, top_k=2)
    >>> r = router(torch.randn(10, 16))
    >>> r.indices.shape, r.weights.shape
    (torch.Size([10, 2]), torch.Size([10, 2]))
    """

    def __init__(self, config: RouterConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = RouterConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a RouterConfig or keyword arguments, not both")
        self.config = config
        self.weight = nn.Parameter(torch.empty(config.num_experts, config.d_model))
        nn.init.normal_(self.weight, std=config.d_model**-0.5)
        self.register_buffer("expert_bias", torch.zeros(config.num_experts, dtype=torch.float32))

    @property
    def num_experts(self) -> int:
        """Number of routed experts ``E``."""
        return self.config.num_experts

    @property
    def top_k(self) -> int:
        """Experts per token ``k`` (``E`` for dense gating)."""
        return self.config.top_k

    def extra_repr(self) -> str:
        c = self.config
        return f"{c.d_model} -> {c.num_experts}, top_k={c.top_k}, score={c.score}, mode={c.mode}"

    def compute_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Router logits, shape ``(T, E)``, in ``promote(x.dtype, float32)``."""
        dtype = torch.promote_types(x.dtype, torch.float32)
        if self.training and self.config.jitter > 0:
            eps = self.config.jitter
            x = x * torch.empty_like(x).uniform_(1.0 - eps, 1.0 + eps)
        logits = F.linear(x.to(dtype), self.weight.to(dtype))
        if self.training and self.config.noise_std > 0:
            logits = logits + self.config.noise_std * torch.randn_like(logits)
        return logits

    @property
    def batch_decisions(self) -> bool:
        """Whether selection depends on the whole batch (expert choice, capacity)."""
        c = self.config
        return c.mode == "expert_choice" or (c.mode == "topk" and c.capacity_factor is not None)

    def forward(self, x: torch.Tensor, batch=None) -> Routing:
        """Route tokens.

        Parameters
        ----------
        x : Tensor, shape (T, d_model)
        batch : Dispatcher, optional
            When the batch is split over ranks (expert parallelism), the object whose
            ``gather_rows(t) -> (rows of all ranks, this rank's offset)`` lets the batch
            decisions (expert-choice selection, capacity dropping) be taken over the
            whole batch, exactly as the single-process router would.

        Returns
        -------
        Routing
        """
        c = self.config
        logits = self.compute_logits(x)
        probs = gate_scores(logits, c.score)
        if c.mode == "dense":
            T = x.shape[0]
            indices = torch.arange(c.num_experts, device=x.device).expand(T, -1).contiguous()
            weights = self._finish(probs)
        elif c.mode == "expert_choice":
            indices, weights = self._expert_choice(probs, batch)
        else:
            indices = self.select(probs)
            weights = self._finish(probs.gather(1, indices))
            if c.capacity_factor is not None:
                indices, weights = self._drop_over_capacity(indices, weights, batch)
        return Routing(indices, weights, logits, probs, c.num_experts)

    def select(self, probs: torch.Tensor) -> torch.Tensor:
        """Top-k expert ids, shape ``(T, k)``, from scores plus the selection bias."""
        c = self.config
        choice = probs
        if c.selection_bias:
            choice = probs + self.expert_bias.to(probs.dtype)
        if c.num_groups > 1:
            T = probs.shape[0]
            # explicit group size: a -1 is ambiguous for T = 0 (a rank without tokens)
            grouped = choice.view(T, c.num_groups, c.num_experts // c.num_groups)
            top = min(2, grouped.shape[-1])
            group_scores = grouped.topk(top, dim=-1).values.sum(-1)
            group_idx = group_scores.topk(c.topk_groups, dim=-1).indices
            allowed = torch.zeros_like(group_scores, dtype=torch.bool)
            allowed.scatter_(1, group_idx, True)
            allowed = allowed.unsqueeze(-1).expand_as(grouped).reshape(T, c.num_experts)
            choice = choice.masked_fill(~allowed, float("-inf"))
        return choice.topk(c.top_k, dim=-1).indices

    def _finish(self, w: torch.Tensor) -> torch.Tensor:
        c = self.config
        if c.normalize:
            w = w / (w.sum(-1, keepdim=True) + c.norm_eps)
        if c.scaling != 1.0:
            w = w * c.scaling
        return w

    def capacity(self, num_tokens: int) -> int:
        """Slots per expert: ``ceil(capacity_factor * T * k / E)`` in ``[1, T]``, 0 if ``T = 0``."""
        c = self.config
        if num_tokens == 0:  # an empty batch: nothing to choose
            return 0
        cap = math.ceil(c.capacity_factor * num_tokens * c.top_k / c.num_experts)
        return max(1, min(num_tokens, cap))

    def _drop_over_capacity(self, indices, weights, batch=None):
        # Priority: slot 0 of every token first, then slot 1, ... (GShard/Switch order).
        T_local = indices.shape[0]
        all_indices, start = (indices, 0) if batch is None else batch.gather_rows(indices)
        keep = self._capacity_keep(all_indices)[start : start + T_local]
        E = self.config.num_experts
        indices = torch.where(keep, indices, torch.full_like(indices, E))
        weights = torch.where(keep, weights, torch.zeros_like(weights))
        return indices, weights

    def _capacity_keep(self, indices):
        T, k = indices.shape
        E = self.config.num_experts
        cap = self.capacity(T)
        slot_major = indices.t().reshape(-1)
        _, order = torch.sort(slot_major, stable=True)
        counts = torch.bincount(slot_major, minlength=E)
        starts = torch.cumsum(counts, 0) - counts
        rank_sorted = torch.arange(order.numel(), device=order.device) - starts[slot_major[order]]
        rank = torch.empty_like(rank_sorted)
        rank[order] = rank_sorted
        return (rank < cap).view(k, T).t()

    def _expert_choice(self, probs, batch=None):
        T_local, E = probs.shape
        all_probs, start = (probs, 0) if batch is None else batch.gather_rows(probs.detach())
        T = all_probs.shape[0]
        cap = self.capacity(T)
        chosen = all_probs.topk(cap, dim=0).indices  # (cap, E): tokens picked by each expert
        mask = torch.zeros_like(all_probs, dtype=torch.bool)
        mask.scatter_(0, chosen, True)
        mask = mask[start : start + T_local]
        k_max = max(1, int(mask.sum(1).max())) if T_local else 1
        # Chosen experts first (stable keeps ascending expert id), then padding.
        slot = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :k_max]
        valid = mask.gather(1, slot)
        indices = torch.where(valid, slot, torch.full_like(slot, E))
        weights = torch.where(valid, probs.gather(1, slot), torch.zeros((), dtype=probs.dtype))
        weights = weights * self.config.scaling
        return indices, weights

    @torch.no_grad()
    def update_bias(self, load: torch.Tensor) -> None:
        """Auxiliary-loss-free balancing step (Wang et al. 2024; DeepSeek-V3).

        .. math:: b_i \\leftarrow b_i + \\gamma\\,\\mathrm{sign}(\\bar c - c_i)

        with ``c_i`` the tokens routed to expert ``i`` in the last step(s) and ``\\bar c``
        their mean: overloaded experts become less attractive. Call it from the training
        loop after the optimiser step; set ``bias_update_rate=0`` to freeze.

        Parameters
        ----------
        load : Tensor, shape (E,)
            Assignments per expert (e.g. :attr:`Routing.load`, summed over layers'
            micro-batches as you see fit).
        """
        if not self.config.selection_bias:
            raise ValueError("this router has selection_bias=False; enable it to update the bias")
        load = load.to(self.expert_bias.device, torch.float32)
        if load.shape != self.expert_bias.shape:
            raise ValueError(
                f"load must have shape {tuple(self.expert_bias.shape)}, got {tuple(load.shape)}"
            )
        self.expert_bias += self.config.bias_update_rate * torch.sign(load.mean() - load)
