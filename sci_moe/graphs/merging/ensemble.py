"""The top-k output ensemble and the two losses that tie it to the merged expert.

Liu et al., "Enhanced Expert Merging for Mixture-of-Experts in Graph Foundation Models"
(NeurIPS 2025) compare the merged expert ``f_{Σ_k w_k θ_{i_k}}`` (the core's expert
surgery: :func:`~sci_moe.moe.merged_forward`, :func:`~sci_moe.moe.merge_experts`) with
the output ensemble of the same experts, and close the gap in two ways:

* :func:`ensemble_forward`: the output ensemble ``Σ_k w_k f_{θ_{i_k}}(x)`` through the
  core :func:`~sci_moe.moe.dispatch`;
* :func:`ensemble_distillation_loss`: distil the ensemble into the merged expert (KDEM);
* :func:`proximity_loss`: keep co-selected experts close in parameter space (PPEM), the
  spread around the merged expert of :func:`~sci_moe.moe.merged_parameters`.

Nothing here is graph-specific: any :class:`~sci_moe.moe.ExpertBank` with stacked tensors
works.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sci_moe.moe import ExpertBank, Routing, dispatch, merged_parameters, stacked_names

__all__ = ["ensemble_distillation_loss", "ensemble_forward", "proximity_loss"]

Selection = Sequence[int] | torch.Tensor
Weights = Sequence[float] | torch.Tensor


def _selection(
    bank: ExpertBank, experts: Selection, weights: Weights, normalise: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Expert ids ``(k,)`` on the bank's device and weights ``(k,)`` in its dtype.

    The checks and messages of the core's merges (:func:`~sci_moe.moe.merged_parameters`);
    ``normalise``: weights ``>= 0`` with a positive sum, divided by their sum.
    """
    param = next(iter(bank.parameters()))
    ids = torch.as_tensor(experts, dtype=torch.long).reshape(-1)
    E = bank.num_experts
    if ids.numel() == 0:
        raise ValueError("select at least one expert to merge")
    if ids.numel() > E:
        raise ValueError(f"selected {ids.numel()} experts but the bank has {E}; use k <= {E}")
    bad = [i for i in ids.tolist() if not 0 <= i < E]
    if bad:
        raise ValueError(
            f"expert ids {bad} out of range for a bank of {E} experts (they must lie in [0, {E}))"
        )
    if isinstance(weights, torch.Tensor):
        w = weights.to(dtype=param.dtype, device=param.device).reshape(-1)
    else:
        w = torch.as_tensor(weights, dtype=param.dtype, device=param.device).reshape(-1)
    if w.numel() != ids.numel():
        raise ValueError(
            f"got {w.numel()} weights for {ids.numel()} experts; give one weight per selected "
            "expert"
        )
    if normalise:
        if bool((w < 0).any()) or not float(w.detach().sum()) > 0:
            raise ValueError("merge weights must be >= 0 with a positive sum")
        w = w / w.sum()
    return ids.to(param.device), w


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
    experts : sequence of int or Tensor, shape (k,)
        Selected experts ``i_k``, ``1 <= k <= E``.
    weights : sequence of float or Tensor, shape (k,)
        ``w_k``, used as given (may carry autograd history).

    Returns
    -------
    Tensor, shape (n, d_out)
    """
    return dispatch(x, _ensemble_routing(bank, x, experts, weights), bank)


def _ensemble_routing(bank: ExpertBank, x: torch.Tensor, experts: Selection, weights: Weights):
    """Every row of ``x`` routed to the same selected experts with the same weights."""
    ids, w = _selection(bank, experts, weights)
    n = x.shape[0]
    return Routing.from_assignments(
        ids.expand(n, -1), w.to(x.dtype).expand(n, -1), bank.num_experts
    )


def ensemble_distillation_loss(
    student: torch.Tensor, teacher: torch.Tensor, kind: str = "mse", temperature: float = 1.0
) -> torch.Tensor:
    """Distillation of a (stopped) teacher, e.g. the experts' ensemble, into a student.

    .. math::

        D_{mse} = \\frac{1}{n}\\sum_{r} \\lVert s_r - \\mathrm{sg}(t_r) \\rVert^2, \\qquad
        D_{kl} = \\frac{\\tau^2}{n}\\sum_r \\mathrm{KL}\\big(
            \\mathrm{softmax}(\\mathrm{sg}(t_r)/\\tau) \\,\\|\\, \\mathrm{softmax}(s_r/\\tau)\\big)

    (KD-enhanced merging: ``s`` the merged expert's embeddings or candidate scores,
    ``t = Σ_k w_k f_{θ_k}(x)`` the top-k ensemble's; Hinton's ``τ²`` keeps gradient
    scales comparable across temperatures).

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

    summed over every stacked tensor of the bank (:func:`~sci_moe.moe.stacked_names`);
    ``θ̄_a`` is the merged expert of :func:`~sci_moe.moe.merged_parameters` with the
    normalised weights (validated as by :func:`~sci_moe.moe.merge_experts`). Motivation
    (PPEM): for a twice-differentiable expert ``f``, ``f(θ̄_a) - Σ_k a_k f(θ_k) = O(R)``,
    so a small ``R`` makes merging nearly exact. Differentiable in the bank (and the
    weights).

    Parameters
    ----------
    bank : ExpertBank
    experts : sequence of int or Tensor, shape (k,)
        Selected experts ``i_k``, ``1 <= k <= E``.
    weights : sequence of float or Tensor, shape (k,)
        ``>= 0`` with a positive sum.

    Returns
    -------
    Tensor, scalar
    """
    ids, w = _selection(bank, experts, weights, normalise=True)
    merged = merged_parameters(bank, ids, w)
    total = w.new_zeros(())
    for name in stacked_names(bank):
        full = getattr(bank, name)
        t, wt = full[ids], w.to(full.dtype)
        mean = merged[name][0]  # θ̄_a, the merged expert
        sq = (t - mean).reshape(t.shape[0], -1).square().sum(-1)
        total = total + (wt * sq).sum().to(total.dtype)
    return total
