"""Routers: learned scores -> :class:`~sci_moe.moe.routing.Routing`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_int, check_real
from .gates import GATE_SCORES, gate_scores, masked_dense_gate
from .router_modes import competence_routing, slot_expanded_top_m, tree_capacity, tree_select
from .routing import Routing

__all__ = ["Router", "RouterConfig"]

_SCORES = GATE_SCORES
_MODES = ("topk", "expert_choice", "dense", "slot_top_m", "competence", "tree")
# Options that only the learned token-choice / expert-choice modes take.
_PLAIN_ONLY = {"selection_bias": False, "num_groups": 1}
# The call keywords of the special modes.
_MODE_KWARGS = {
    "mask": "dense",
    "own": "slot_top_m",
    "usage": "competence",
    "parents": "tree",
    "scores": "tree",
}


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
        Score function applied to the logits (:func:`sci_moe.moe.gates.gate_scores`): softmax
        over experts, independent sigmoids as in DeepSeek-V3, or the normalised softplus
        ``softplus(z) / (sum softplus(z) + 1e-9)`` of MoSES (Pan et al. 2025).
    mode : {"topk", "expert_choice", "dense", "slot_top_m", "competence", "tree"}
        How experts are selected (the call's extra keywords in brackets):

        * ``"topk"``: token-choice top-k.
        * ``"expert_choice"``: every expert chooses its tokens, with capacity (Zhou et
          al. 2022).
        * ``"dense"`` [``mask=``]: soft gating, every expert used with its score as
          weight; an optional ``(T, E)`` or ``(E,)`` boolean ``mask`` of allowed
          experts is applied before the normalisation (masked softmax; a masked
          expert gets exactly 0 and no gradient), then ``normalize`` and ``scaling``
          as usual (pass ``normalize=False`` for the plain masked gate).
        * ``"slot_top_m"`` [``own=``]: slot-expanded top-``M`` of FedLEASE (Wang et
          al., NeurIPS 2025): ``2E - 1`` slot scores (``weight`` has ``2E - 1`` rows),
          the first ``E`` slots point to each token's *own* expert, the others to the
          remaining experts; softmax over slots, top-``E`` slots, weights of the slots
          of one expert summed. ``indices`` ``(T, E)``: column 0 the own expert,
          column ``j >= 1`` another expert or dropped. ``normalize`` divides by the
          selected slots' mass (the paper does not: pass ``normalize=False``). Needs
          ``score="softmax"``.
        * ``"competence"`` [``usage=``]: training-free (AnyGraph, Xia & Huang 2024):
          no projection; the input is an ``(items, E)`` matrix of measured expert
          competences (``d_model`` must equal ``num_experts``), recalibrated by
          ``recalibration`` with the experts' ``usage`` and mixed by a softmax at
          ``temperature`` over the top-k. Scores are detached.
        * ``"tree"`` [``parents=``, ``groups=``, ``scores=``]: one level of an
          expert-choice tree (MoRE-Brain, Wei et al., NeurIPS 2025): the ``E``
          experts are the children of ``parents`` parent experts (``E / parents``
          each); each child chooses ``k`` of the rows its parent produced, by a
          softmax over its siblings; ``k = min(v, floor(capacity_factor * v / b))``
          for ``v`` rows per parent and ``b`` children. Returns a gather routing
          (:attr:`Routing.source <sci_moe.moe.Routing.source>`).
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
    temperature : float
        ``mode="competence"``: softmax temperature ``> 0`` over the selected scores.
    recalibration : float
        ``mode="competence"``: AnyGraph's ``rho >= 0`` (0 switches it off); needs the
        call's ``usage``.
    init_std : float, optional
        Standard deviation of the initial projection (default ``d_model ** -0.5``).
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
    temperature: float = 0.1
    recalibration: float = 0.0
    init_std: float | None = None

    def __post_init__(self) -> None:
        for name in ("d_model", "num_experts", "top_k", "num_groups", "topk_groups"):
            setattr(self, name, check_int(name, getattr(self, name)))
        for name in ("norm_eps", "scaling", "bias_update_rate", "jitter", "noise_std"):
            setattr(self, name, check_real(name, getattr(self, name)))
        for name in ("temperature", "recalibration"):
            setattr(self, name, check_real(name, getattr(self, name)))
        if self.init_std is not None:
            self.init_std = check_real("init_std", self.init_std)
            if not self.init_std >= 0:
                raise ValueError(f"init_std must be >= 0, got {self.init_std}")
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
        self._check_mode()
        if self.mode in ("dense", "slot_top_m"):
            self.top_k = self.num_experts
        elif self.mode == "tree":
            self.top_k = 1
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
        if self.mode in ("expert_choice", "tree") and self.capacity_factor is None:
            raise ValueError(f"{self.mode} routing needs a capacity_factor (e.g. 1.0)")
        if self.capacity_factor is not None and self.capacity_factor <= 0:
            raise ValueError(f"capacity_factor must be > 0, got {self.capacity_factor}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {self.noise_std}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.recalibration < 0:
            raise ValueError(f"recalibration must be >= 0, got {self.recalibration}")

    def _check_mode(self) -> None:
        """Options the special modes do not take."""
        if self.mode not in ("slot_top_m", "competence", "tree"):
            return
        bad = [f"{k}={getattr(self, k)!r}" for k, v in _PLAIN_ONLY.items() if getattr(self, k) != v]
        if self.mode != "tree" and self.capacity_factor is not None:
            bad.append(f"capacity_factor={self.capacity_factor!r}")
        if self.mode == "competence" and (self.jitter or self.noise_std):
            bad.append("jitter/noise_std")
        if self.score != "softmax" and self.mode != "competence":
            bad.append(f"score={self.score!r}")
        if bad:
            raise ValueError(f"mode={self.mode!r} does not take {', '.join(bad)}; drop them")
        if self.mode == "competence" and self.d_model != self.num_experts:
            raise ValueError(
                f"mode='competence' reads an (items, num_experts) score matrix: d_model must "
                f"equal num_experts={self.num_experts}, got {self.d_model}"
            )


class Router(nn.Module):
    """Linear router producing a :class:`~sci_moe.moe.routing.Routing`.

    ``logits = x W^T`` (computed in at least float32), ``s = softmax(logits)``,
    ``sigmoid(logits)`` or the normalised softplus (:func:`sci_moe.moe.gates.gate_scores`);
    selection on ``s + b`` (``b`` the optional selection bias, with
    optional group limiting); weights ``w = s[selected]``, optionally renormalised and
    scaled.

    Parameters
    ----------
    config : RouterConfig
        See :class:`RouterConfig`; keyword arguments build one when omitted.

    Attributes
    ----------
    weight : Parameter, shape (E, d_model), or None
        Router projection (``nn.Linear`` layout, no bias); ``2E - 1`` rows (slot scores)
        for ``mode="slot_top_m"``, ``None`` for ``mode="competence"`` (no projection).
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
        c = config
        std = c.d_model**-0.5 if c.init_std is None else c.init_std
        if c.mode == "competence":
            self.register_parameter("weight", None)
        elif c.mode == "slot_top_m":
            # randn * std (FedLEASE's init), not normal_: equal except for < 16 entries
            self.weight = nn.Parameter(torch.randn(2 * c.num_experts - 1, c.d_model) * std)
        else:
            self.weight = nn.Parameter(torch.empty(c.num_experts, c.d_model))
            nn.init.normal_(self.weight, std=std)
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

    def forward(
        self,
        x: torch.Tensor,
        batch=None,
        *,
        mask: torch.Tensor | None = None,
        own: int | torch.Tensor | None = None,
        usage: torch.Tensor | None = None,
        parents: int | None = None,
        groups: int | None = None,
        scores: torch.Tensor | None = None,
    ) -> Routing:
        """Route tokens.

        Parameters
        ----------
        x : Tensor, shape (T, d_model)
            The tokens; for ``mode="competence"`` the ``(items, E)`` competence scores;
            for ``mode="tree"`` the candidate rows ``(groups * parents * v, d_model)``
            ordered ``(group, parent, row)``.
        batch : Dispatcher, optional
            When the batch is split over ranks (expert parallelism), the object whose
            ``gather_rows(t) -> (rows of all ranks, this rank's offset)`` lets the batch
            decisions (expert-choice selection, capacity dropping) be taken over the
            whole batch, exactly as the single-process router would.
        mask : Tensor, shape (T, E) or (E,), bool, optional
            ``mode="dense"``: allowed experts (every row needs one).
        own : int or Tensor, shape (T,)
            ``mode="slot_top_m"`` (required): each token's own expert.
        usage : Tensor, shape (E,), optional
            ``mode="competence"``: examples seen per expert (needed when
            ``recalibration > 0``).
        parents, groups : int
            ``mode="tree"`` (required): parent experts ``P`` (``E`` divisible by it)
            and groups ``G`` of candidate rows (``T`` divisible by ``G P``).
        scores : Tensor, shape (G, P, v, E / P), optional
            ``mode="tree"``: the candidate scores of :meth:`tree_scores` computed
            beforehand (to keep them; drawn once with the training noise).

        Returns
        -------
        Routing
        """
        c = self.config
        self._check_mode_kwargs(mask=mask, own=own, usage=usage, parents=parents, scores=scores)
        if c.mode == "competence":
            return competence_routing(
                x,
                c.top_k,
                usage=usage,
                recalibration=c.recalibration,
                temperature=c.temperature,
            )
        if c.mode == "tree":
            if parents is None or groups is None:
                raise ValueError("mode='tree' needs parents= and groups=")
            if scores is None:
                scores = self.tree_scores(x, parents, groups)
            b = scores.shape[-1]
            cap = tree_capacity(scores.shape[2], b, c.capacity_factor)
            return tree_select(scores, cap, x.dtype)
        logits = self.compute_logits(x)
        if c.mode == "slot_top_m":
            if own is None:
                raise ValueError("mode='slot_top_m' needs own= (each token's own expert)")
            return slot_expanded_top_m(logits, own, normalize=c.normalize)
        if mask is not None:
            probs = masked_dense_gate(logits, c.score, mask)
        else:
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

    def _check_mode_kwargs(self, **kwargs) -> None:
        for name, value in kwargs.items():
            mode = _MODE_KWARGS[name]
            if value is not None and self.config.mode != mode:
                raise ValueError(
                    f"{name}= is an option of mode={mode!r}; this router has "
                    f"mode={self.config.mode!r}"
                )

    def tree_scores(self, x: torch.Tensor, parents: int, groups: int) -> torch.Tensor:
        """``mode="tree"``: every candidate row's scores over its parent's children.

        .. math:: P_{x,c} = \\mathrm{softmax}_{c \\in \\mathrm{ch}(p)}\\big(W_c x\\big)

        (Gaussian noise of ``noise_std`` on the logits in training mode).

        Parameters
        ----------
        x : Tensor, shape (G * P * v, d_model)
            Candidate rows ordered ``(group, parent, row)``.
        parents, groups : int
            ``P`` and ``G``.

        Returns
        -------
        Tensor, shape (G, P, v, E / P)
            In ``promote(x.dtype, float32)``.
        """
        c = self.config
        if c.mode != "tree":
            raise ValueError(f"tree_scores is for mode='tree', this router has {c.mode!r}")
        P, G = int(parents), int(groups)
        if P < 1 or G < 1 or c.num_experts % P:
            raise ValueError(
                f"parents={parents} must divide num_experts={c.num_experts} and groups={groups} "
                "must be >= 1"
            )
        if x.dim() != 2 or x.shape[1] != c.d_model or x.shape[0] % (G * P):
            raise ValueError(
                f"x must have shape (groups * parents * rows, {c.d_model}) with "
                f"groups={G}, parents={P}; got {tuple(x.shape)}"
            )
        b = c.num_experts // P
        cand = x.view(G, P, x.shape[0] // (G * P), c.d_model)
        dtype = torch.promote_types(x.dtype, torch.float32)
        w = self.weight.to(dtype).view(P, b, -1)
        logits = torch.einsum("gpkd,pbd->gpkb", cand.to(dtype), w)
        if self.training and c.noise_std > 0:
            logits = logits + c.noise_std * torch.randn_like(logits)
        return logits.softmax(-1)

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
