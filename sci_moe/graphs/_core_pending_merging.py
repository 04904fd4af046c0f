"""General pieces of expert merging that the core lacks (to be moved into ``sci_moe.moe``).

Written as core code: generic names, nothing graph-specific.

* :class:`ResidualMLPExperts`: ``E`` stacks of residual, layer-normalised MLP layers
  (AnyGraph's expert), every tensor stacked over experts so the core's expert surgery
  (:func:`~sci_moe.moe.merge_experts`, :func:`~sci_moe.moe.copy_expert`) applies.
* :func:`merged_parameters` / :func:`merged_forward`: the *differentiable* parameter-space
  merge ``θ_m = Σ_k w_k θ_k`` of any bank's selected experts, run through
  :func:`torch.func.functional_call` on a one-expert copy (the core's
  :func:`~sci_moe.moe.merge_experts` is the no-grad deployment form of the same map).
* :func:`ensemble_forward`: ``Σ_k w_k f_{θ_k}(x)`` through the core dispatch.
* :func:`ensemble_distillation_loss`: the KD-to-ensemble loss of KD-enhanced merging.
* :func:`proximity_loss`: ``Σ_k w_k ||θ_k - θ̄_w||²`` (parameter-proximity merging).
* :func:`competence_routing`: a training-free router: expert scores computed from data
  (no learned gate), optional usage recalibration, top-k, as a core
  :class:`~sci_moe.moe.Routing`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn
from torch.func import functional_call

from sci_moe.moe import ExpertBank, Routing, dispatch, slice_experts, stacked_names

__all__ = [
    "ResidualMLPExperts",
    "competence_routing",
    "ensemble_distillation_loss",
    "ensemble_forward",
    "merged_forward",
    "merged_parameters",
    "proximity_loss",
]


class ResidualMLPExperts(ExpertBank):
    """``E`` experts of ``L`` residual layers ``h <- LN_{e,l}(drop(act(W_{e,l} h + b_{e,l})) + h)``.

    The expert of AnyGraph (Xia & Huang 2024, ``MLP`` in its ``model.py``): width
    ``d`` throughout, a learned LayerNorm (``γ, β``) after every residual sum.

    Parameters
    ----------
    num_experts, d_model, num_layers : int
    activation : {"relu", "leaky_relu", "gelu", "identity"}
    dropout : float
        Dropout on the branch, active in training mode only.
    eps : float
        LayerNorm epsilon.

    Attributes
    ----------
    weight : Parameter, shape (E, L, d, d)
    bias, ln_weight, ln_bias : Parameter, shape (E, L, d)
    """

    _ACTS: ClassVar[dict] = {
        "relu": nn.functional.relu,
        "leaky_relu": lambda x: nn.functional.leaky_relu(x, 0.5),
        "gelu": nn.functional.gelu,
        "identity": lambda x: x,
    }

    def __init__(
        self,
        num_experts: int,
        d_model: int,
        num_layers: int = 2,
        activation: str = "leaky_relu",
        dropout: float = 0.0,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_experts < 1 or d_model < 1 or num_layers < 1:
            raise ValueError(
                f"num_experts, d_model and num_layers must be >= 1, got {num_experts}, "
                f"{d_model}, {num_layers}"
            )
        if activation not in self._ACTS:
            raise ValueError(f"activation must be one of {sorted(self._ACTS)}, got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.num_experts, self.d_in, self.d_out = num_experts, d_model, d_model
        self.num_layers, self.activation, self.dropout, self.eps = (
            num_layers,
            activation,
            dropout,
            eps,
        )
        E, L, d = num_experts, num_layers, d_model
        bound = math.sqrt(6.0 / (2 * d))  # xavier-uniform, as AnyGraph
        self.weight = nn.Parameter(torch.empty(E, L, d, d).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(E, L, d))
        self.ln_weight = nn.Parameter(torch.ones(E, L, d))
        self.ln_bias = nn.Parameter(torch.zeros(E, L, d))

    def _layer(self, h, w, b, g, beta):
        z = nn.functional.linear(h, w, b)
        z = self._ACTS[self.activation](z)
        z = nn.functional.dropout(z, self.dropout, self.training)
        return nn.functional.layer_norm(z + h, (self.d_in,), eps=self.eps) * g + beta

    def forward_sorted(self, x, plan):
        kept = plan.num_kept
        expert = plan.expert[:kept]
        h = x
        for layer in range(self.num_layers):
            z = self._linear(h, self.weight[:, layer].contiguous(), plan, self.bias[:, layer])
            z = self._ACTS[self.activation](z)
            z = nn.functional.dropout(z, self.dropout, self.training)
            z = nn.functional.layer_norm(z + h, (self.d_in,), eps=self.eps)
            h = z * self.ln_weight[expert, layer] + self.ln_bias[expert, layer]
        return h

    def forward_expert(self, e, x):
        h = x
        for layer in range(self.num_layers):
            h = self._layer(
                h,
                self.weight[e, layer],
                self.bias[e, layer],
                self.ln_weight[e, layer],
                self.ln_bias[e, layer],
            )
        return h

    def extra_repr(self) -> str:
        return (
            f"num_experts={self.num_experts}, d_model={self.d_in}, "
            f"num_layers={self.num_layers}, activation={self.activation!r}"
        )


def _check_selection(bank: ExpertBank, experts, weights) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.as_tensor(experts, dtype=torch.long).reshape(-1)
    param = next(iter(bank.parameters()))
    w = torch.as_tensor(weights, dtype=param.dtype, device=param.device).reshape(-1)
    if ids.numel() == 0:
        raise ValueError("select at least one expert to merge")
    if ids.numel() > bank.num_experts:
        raise ValueError(
            f"selected {ids.numel()} experts but the bank has {bank.num_experts}; use k <= "
            f"{bank.num_experts}"
        )
    if w.shape != ids.shape:
        raise ValueError(f"give one weight per selected expert ({ids.numel()}), got {w.numel()}")
    if int(ids.min()) < 0 or int(ids.max()) >= bank.num_experts:
        raise ValueError(f"expert ids must lie in [0, {bank.num_experts}), got {ids.tolist()}")
    return ids.to(param.device), w


def merged_parameters(bank: ExpertBank, experts, weights) -> dict[str, torch.Tensor]:
    """The merged expert's stacked tensors, differentiable in the bank and the weights.

    .. math:: \\theta_m = \\sum_{k} w_k\\, \\theta_{i_k}

    for every stacked tensor of the bank (:func:`~sci_moe.moe.stacked_names`). The
    weights are used as given (normalise them for a convex merge).

    Parameters
    ----------
    bank : ExpertBank
    experts : sequence of int or Tensor, shape (k,)
        Selected experts ``i_k``.
    weights : sequence of float or Tensor, shape (k,)
        Merge weights ``w_k`` (may carry autograd history).

    Returns
    -------
    dict of str to Tensor
        ``name -> tensor of shape (1, *per_expert_shape)`` (a one-expert bank's layout).
    """
    ids, w = _check_selection(bank, experts, weights)
    out = {}
    for name in stacked_names(bank):
        t = getattr(bank, name)
        out[name] = torch.tensordot(w.to(t.dtype), t[ids], dims=1).unsqueeze(0)
    return out


class _FirstExpert(nn.Module):
    def __init__(self, bank: ExpertBank) -> None:
        super().__init__()
        self.bank = bank

    def forward(self, x):
        return self.bank.forward_expert(0, x)


def merged_forward(bank: ExpertBank, x: torch.Tensor, experts, weights) -> torch.Tensor:
    """Run the merged expert ``f_{Σ_k w_k θ_k}(x)`` with gradients to the bank and weights.

    The merged tensors (:func:`merged_parameters`) are put into a one-expert copy of the
    bank (:func:`~sci_moe.moe.slice_experts`) by :func:`torch.func.functional_call`, so
    any bank with stacked tensors works and the cost is one expert's forward (plus the
    ``k`` weighted sums of the parameters). With ``torch.no_grad`` it equals
    ``merge_experts(bank, experts, weights).forward_expert(0, x)`` for normalised weights.

    Parameters
    ----------
    bank : ExpertBank
    x : Tensor, shape (n, d_in)
    experts, weights : see :func:`merged_parameters`

    Returns
    -------
    Tensor, shape (n, d_out)
    """
    params = merged_parameters(bank, experts, weights)
    template = _FirstExpert(slice_experts(bank, 0, 1))
    template.train(bank.training)
    return functional_call(template, {f"bank.{k}": v for k, v in params.items()}, (x,))


def ensemble_forward(bank: ExpertBank, x: torch.Tensor, experts, weights) -> torch.Tensor:
    """The output ensemble ``Σ_k w_k f_{θ_{i_k}}(x)`` of the selected experts (k forwards).

    Every row of ``x`` is routed to the same ``k`` experts
    (:meth:`Routing.from_assignments`) and run through :func:`~sci_moe.moe.dispatch`,
    the core's one grouped path.

    Parameters
    ----------
    bank : ExpertBank
    x : Tensor, shape (n, d_in)
    experts, weights : see :func:`merged_parameters`

    Returns
    -------
    Tensor, shape (n, d_out)
    """
    ids, w = _check_selection(bank, experts, weights)
    n = x.shape[0]
    routing = Routing.from_assignments(
        ids.expand(n, -1), w.to(x.dtype).expand(n, -1), bank.num_experts
    )
    return dispatch(x, routing, bank)


def ensemble_distillation_loss(
    student: torch.Tensor, teacher: torch.Tensor, kind: str = "mse", temperature: float = 1.0
) -> torch.Tensor:
    """KD-to-ensemble loss: the merged model should match the (stopped) ensemble.

    .. math::

        D_{mse} = \\frac{1}{n}\\sum_{r} \\lVert s_r - \\mathrm{sg}(t_r) \\rVert^2, \\qquad
        D_{kl} = \\frac{\\tau^2}{n}\\sum_r \\mathrm{KL}\\big(
            \\mathrm{softmax}(\\mathrm{sg}(t_r)/\\tau) \\,\\|\\, \\mathrm{softmax}(s_r/\\tau)\\big)

    (KD-enhanced merging, Liu et al. NeurIPS 2025: ``s`` the merged expert's embeddings
    or candidate scores, ``t = Σ_k w_k f_{θ_k}(x)`` the top-k ensemble's; Hinton's
    ``τ²`` keeps gradient scales comparable across temperatures).

    Parameters
    ----------
    student, teacher : Tensor, shape (n, c)
        Rows ``r``: embeddings (``"mse"``) or logits over ``c`` candidates (``"kl"``).
        The teacher is detached here.
    kind : {"mse", "kl"}
    temperature : float
        ``τ`` for ``"kl"``.

    Returns
    -------
    Tensor, scalar
    """
    if student.shape != teacher.shape or student.dim() != 2:
        raise ValueError(
            f"student and teacher must have one shape (n, c); got {tuple(student.shape)} and "
            f"{tuple(teacher.shape)}"
        )
    teacher = teacher.detach()
    if kind == "mse":
        return (student - teacher).square().sum(-1).mean()
    if kind == "kl":
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        logp_t = (teacher / temperature).log_softmax(-1)
        logp_s = (student / temperature).log_softmax(-1)
        kl = (logp_t.exp() * (logp_t - logp_s)).sum(-1)
        return temperature**2 * kl.mean()
    raise ValueError(f"kind must be 'mse' or 'kl', got {kind!r}")


def proximity_loss(bank: ExpertBank, experts, weights) -> torch.Tensor:
    """Parameter-proximity regulariser of co-selected experts.

    .. math::

        R = \\sum_k w_k \\lVert \\theta_{i_k} - \\bar\\theta_w \\rVert^2, \\qquad
        \\bar\\theta_w = \\sum_k w_k \\theta_{i_k}

    summed over every stacked tensor of the bank; weights normalised to sum to one
    first. Motivation (PPEM, Liu et al. NeurIPS 2025): for a twice-differentiable
    expert ``f``, ``f(\\bar\\theta_w) - Σ_k w_k f(θ_k) = O(R)``, so a small ``R`` makes
    merging nearly exact. Differentiable in the bank (and the weights).

    Parameters
    ----------
    bank : ExpertBank
    experts, weights : see :func:`merged_parameters`

    Returns
    -------
    Tensor, scalar
    """
    ids, w = _check_selection(bank, experts, weights)
    if (w < 0).any() or not float(w.sum()) > 0:
        raise ValueError("proximity weights must be >= 0 with a positive sum")
    w = w / w.sum()
    total = w.new_zeros(())
    for name in stacked_names(bank):
        t = getattr(bank, name)[ids]
        wt = w.to(t.dtype)
        mean = torch.tensordot(wt, t, dims=1)
        sq = (t - mean).reshape(t.shape[0], -1).square().sum(-1)
        total = total + (wt * sq).sum().to(total.dtype)
    return total


def competence_routing(
    scores: torch.Tensor,
    top_k: int = 1,
    *,
    usage: torch.Tensor | None = None,
    recalibration: float = 0.0,
    temperature: float = 0.1,
) -> Routing:
    """A training-free router: top-k experts by a competence score computed from data.

    Each item (a graph, a data set, a task) has a score per expert measured by running
    the expert on the item's own data (AnyGraph: the mean ``σ(⟨z_u,z_v⟩ - ⟨z_u,z_n⟩)``
    over observed edges and sampled negatives). With ``recalibration = ρ > 0`` the
    score of an expert trained on ``n_e`` examples is scaled as in AnyGraph, so that
    under-used experts get a chance:

    .. math::

        \\tilde s_{ge} = s_{ge}\\Big[\\rho\\Big(1 - \\frac{n_e}{\\sum_j n_j}\\Big) + 1
            - \\frac{\\rho}{2}\\Big], \\qquad
        w_{gj} = \\frac{\\exp(\\tilde s_{g i_j}/\\tau)}{\\sum_{l \\le k}
            \\exp(\\tilde s_{g i_l}/\\tau)}

    for the ``k`` highest ``i_1, ..., i_k`` (rank order kept in the slots).

    Parameters
    ----------
    scores : Tensor, shape (G, E)
        Competence of every expert on every item.
    top_k : int
        ``1 <= k <= E``.
    usage : Tensor, shape (E,), optional
        Training examples seen per expert ``n_e`` (needed when ``recalibration > 0``).
    recalibration : float
        ``ρ >= 0`` (AnyGraph's ``reca_range``; 0 switches it off).
    temperature : float
        ``τ > 0`` of the softmax over the selected scores.

    Returns
    -------
    Routing
        ``indices``/``weights`` of shape ``(G, k)`` (slot 0 is the rank-1 expert),
        ``probs`` the softmax of all recalibrated scores over the experts.
    """
    if scores.dim() != 2:
        raise ValueError(f"scores must have shape (items, experts), got {tuple(scores.shape)}")
    E = scores.shape[1]
    if not 1 <= top_k <= E:
        raise ValueError(f"top_k must lie in [1, {E}] (the number of experts), got {top_k}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if recalibration < 0:
        raise ValueError(f"recalibration must be >= 0, got {recalibration}")
    s = scores.detach().to(torch.promote_types(scores.dtype, torch.float32))
    if recalibration > 0:
        if usage is None or usage.shape != (E,):
            raise ValueError(f"recalibration > 0 needs usage of shape ({E},)")
        n = usage.to(s.dtype)
        total = float(n.sum())
        frac = n / total if total > 0 else torch.zeros_like(n)
        s = s * ((1.0 - frac) * recalibration + 1.0 - recalibration / 2.0)
    top, idx = s.topk(top_k, dim=-1)
    weights = (top / temperature).softmax(-1)
    probs = (s / temperature).softmax(-1)
    return Routing.from_assignments(idx, weights, E, probs=probs, logits=s / temperature)
