"""Differentiable expert merging: merged experts, output ensembles and their losses.

The parameter-space merge of selected experts of any bank with stacked tensors,

.. math:: \\theta_m = \\sum_k w_k\\, \\theta_{i_k},

in the form that training needs (gradients to the bank and to the weights), next to the
no-grad deployment form :func:`~sci_moe.moe.merge_experts`: both use one validation of
the selection and one weighted-sum map (:mod:`sci_moe.moe.expert_ops`).

* :func:`merged_parameters` / :func:`merged_forward`: the merged expert's tensors, and
  its forward through :func:`torch.func.functional_call` on a one-expert copy.
* :func:`ensemble_forward`: the output ensemble ``Σ_k w_k f_{θ_{i_k}}(x)`` through the
  core :func:`~sci_moe.moe.dispatch`.
* :func:`ensemble_distillation_loss`: distil the ensemble into the merged expert (KDEM).
* :func:`proximity_loss`: keep co-selected experts close in parameter space (PPEM).

Liu et al., "Enhanced Expert Merging for Mixture-of-Experts in Graph Foundation Models"
(NeurIPS 2025) use all of them; nothing here is graph-specific.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call

from .dispatch import dispatch
from .expert_ops import _expert_ids, _merge_weights, _weighted_sum, slice_experts, stacked_names
from .experts import ExpertBank
from .routing import Routing

__all__ = [
    "ensemble_distillation_loss",
    "ensemble_forward",
    "merged_forward",
    "merged_parameters",
    "proximity_loss",
]

Selection = Sequence[int] | torch.Tensor
Weights = Sequence[float] | torch.Tensor


def _check_selection(
    bank: ExpertBank, experts: Selection, weights: Weights, normalise: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Expert ids ``(k,)`` on the bank's device and weights ``(k,)`` in its dtype."""
    param = next(iter(bank.parameters()))
    ids = torch.as_tensor(experts, dtype=torch.long).reshape(-1)
    if ids.numel() == 0:
        raise ValueError("select at least one expert to merge")
    if ids.numel() > bank.num_experts:
        raise ValueError(
            f"selected {ids.numel()} experts but the bank has {bank.num_experts}; use k <= "
            f"{bank.num_experts}"
        )
    _expert_ids(ids, bank.num_experts, "expert ids")
    w = _merge_weights(
        weights, ids.numel(), normalise=normalise, dtype=param.dtype, device=param.device
    )
    return ids.to(param.device), w


def merged_parameters(
    bank: ExpertBank, experts: Selection, weights: Weights
) -> dict[str, torch.Tensor]:
    """The merged expert's stacked tensors, differentiable in the bank and the weights.

    .. math:: \\theta_m = \\sum_{k} w_k\\, \\theta_{i_k}

    for every stacked tensor of the bank (:func:`~sci_moe.moe.stacked_names`). The
    weights are used as given (normalise them for a convex merge;
    :func:`~sci_moe.moe.merge_experts` does).

    Parameters
    ----------
    bank : ExpertBank
    experts : sequence of int or Tensor, shape (k,)
        Selected experts ``i_k``, ``1 <= k <= E``.
    weights : sequence of float or Tensor, shape (k,)
        Merge weights ``w_k`` (may carry autograd history).

    Returns
    -------
    dict of str to Tensor
        ``name -> tensor of shape (1, *per_expert_shape)`` (a one-expert bank's layout).
    """
    ids, w = _check_selection(bank, experts, weights)
    return {
        name: _weighted_sum(getattr(bank, name), ids, w).unsqueeze(0)
        for name in stacked_names(bank)
    }


class _FirstExpert(nn.Module):
    def __init__(self, bank: ExpertBank) -> None:
        super().__init__()
        self.bank = bank

    def forward(self, x):
        return self.bank.forward_expert(0, x)


def merged_forward(
    bank: ExpertBank, x: torch.Tensor, experts: Selection, weights: Weights
) -> torch.Tensor:
    """Run the merged expert ``f_{Σ_k w_k θ_k}(x)`` with gradients to the bank and weights.

    The merged tensors (:func:`merged_parameters`) are put into a one-expert copy of the
    bank (:func:`~sci_moe.moe.slice_experts`) by :func:`torch.func.functional_call`, so
    any bank with stacked tensors works and the cost is one expert's forward (plus the
    ``k`` weighted sums of the parameters). Under ``torch.no_grad`` it equals
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


def ensemble_forward(
    bank: ExpertBank, x: torch.Tensor, experts: Selection, weights: Weights
) -> torch.Tensor:
    """The output ensemble ``Σ_k w_k f_{θ_{i_k}}(x)`` of the selected experts (k forwards).

    Every row of ``x`` is routed to the same ``k`` experts
    (:meth:`Routing.from_assignments <sci_moe.moe.Routing.from_assignments>`) and run
    through :func:`~sci_moe.moe.dispatch`, the core's one grouped path.

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
    """Distillation of a (stopped) teacher, e.g. the experts' ensemble, into a student.

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
        ``τ > 0`` for ``"kl"``.

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


def proximity_loss(bank: ExpertBank, experts: Selection, weights: Weights) -> torch.Tensor:
    """Parameter-proximity regulariser of co-selected experts.

    .. math::

        R = \\sum_k a_k \\lVert \\theta_{i_k} - \\bar\\theta_a \\rVert^2, \\qquad
        \\bar\\theta_a = \\sum_k a_k \\theta_{i_k}, \\qquad a_k = \\frac{w_k}{\\sum_j w_j}

    summed over every stacked tensor of the bank (the weights are validated and
    normalised as by :func:`~sci_moe.moe.merge_experts`). Motivation (PPEM, Liu et al.
    NeurIPS 2025): for a twice-differentiable expert ``f``,
    ``f(θ̄_a) - Σ_k a_k f(θ_k) = O(R)``, so a small ``R`` makes merging nearly exact.
    Differentiable in the bank (and the weights).

    Parameters
    ----------
    bank : ExpertBank
    experts : see :func:`merged_parameters`
    weights : sequence of float or Tensor, shape (k,)
        ``>= 0`` with a positive sum.

    Returns
    -------
    Tensor, scalar
    """
    ids, w = _check_selection(bank, experts, weights, normalise=True)
    total = w.new_zeros(())
    for name in stacked_names(bank):
        full = getattr(bank, name)
        t, wt = full[ids], w.to(full.dtype)
        mean = _weighted_sum(full, ids, w)  # θ̄_a, the merged expert
        sq = (t - mean).reshape(t.shape[0], -1).square().sum(-1)
        total = total + (wt * sq).sum().to(total.dtype)
    return total
