"""Differentiable expert merging: the merged expert's tensors and its forward.

The parameter-space merge of selected experts of any bank with stacked tensors,

.. math:: \\theta_m = \\sum_k w_k\\, \\theta_{i_k},

in the form that training needs (gradients to the bank and to the weights), next to the
no-grad deployment form :func:`~sci_moe.moe.merge_experts`: both use one validation of
the selection and one weighted-sum map (:mod:`sci_moe.moe.expert_ops`).

* :func:`merged_parameters` / :func:`merged_forward`: the merged expert's tensors, and
  its forward through :func:`torch.func.functional_call` on a one-expert copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call

from .expert_ops import _expert_ids, _merge_weights, _weighted_sum, slice_experts, stacked_names
from .experts import ExpertBank

__all__ = ["merged_forward", "merged_parameters"]

Selection = Sequence[int] | torch.Tensor
Weights = Sequence[float] | torch.Tensor


def _check_selection(
    bank: ExpertBank, experts: Selection, weights: Weights
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
        weights, ids.numel(), normalise=False, dtype=param.dtype, device=param.device
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
