"""The auxiliary losses of one routed call, local or over the global batch."""

from __future__ import annotations

import torch
import torch.distributed as dist

from .losses import _all_reduce_with_grad, load_balancing_loss, router_z_loss
from .routing import Routing
from .specialization import orthogonality_loss, selected_outputs, selection_scores, variance_loss

__all__ = ["auxiliary_losses"]


def auxiliary_losses(
    routing: Routing,
    load_balance_coef: float,
    z_loss_coef: float,
    variance_coef: float = 0.0,
    orthogonality_coef: float = 0.0,
    expert_outputs: torch.Tensor | None = None,
    global_batch: bool = False,
    process_group=None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The unweighted auxiliary losses of one call and their weighted sum.

    .. math:: L_{aux} = \\alpha L_{bal} + \\zeta L_z + \\gamma L_v + \\beta L_o

    Always ``"load_balance"`` (:func:`~sci_moe.moe.load_balancing_loss`) and
    ``"z_loss"`` (:func:`~sci_moe.moe.router_z_loss`); ``"variance"`` when
    ``variance_coef > 0`` and ``"orthogonality"`` when ``orthogonality_coef > 0`` (which
    needs ``expert_outputs``); the last two use ``reduction="mean"`` over tokens.

    Parameters
    ----------
    routing : Routing
        Of ``T`` tokens.
    load_balance_coef, z_loss_coef, variance_coef, orthogonality_coef : float
        ``α, ζ, γ, β``.
    expert_outputs : Tensor, shape (routing.plan.num_kept, d_out), optional
        Unweighted expert outputs in plan order (for ``L_o``).
    global_batch : bool
        With ``torch.distributed`` initialised: every loss is that of the **global**
        batch (all ranks of ``process_group``): the statistics (expert counts, score sums,
        token counts) are all-reduced. Each rank's value is the global loss, its gradient
        the part flowing through this rank's tokens, so summing the ranks' gradients
        (:func:`~sci_moe.moe.parallel.sync_replicated_grads`) gives the gradient of the
        single-process loss on the concatenated batch. A no-op otherwise.
    process_group : ProcessGroup, optional
        Default: the world group.

    Returns
    -------
    losses : dict of str to Tensor (scalars)
    aux : Tensor, scalar
    """
    if global_batch and dist.is_available() and dist.is_initialized():
        return _global_losses(
            routing,
            load_balance_coef,
            z_loss_coef,
            variance_coef,
            orthogonality_coef,
            expert_outputs,
            process_group,
        )
    losses = {"load_balance": load_balancing_loss(routing), "z_loss": router_z_loss(routing)}
    aux = load_balance_coef * losses["load_balance"] + z_loss_coef * losses["z_loss"]
    if variance_coef > 0:
        losses["variance"] = variance_loss(routing, reduction="mean")
        aux = aux + variance_coef * losses["variance"]
    if orthogonality_coef > 0:
        outs = _selected(routing, expert_outputs)
        losses["orthogonality"] = orthogonality_loss(outs, reduction="mean")
        aux = aux + orthogonality_coef * losses["orthogonality"]
    return losses, aux


def _selected(routing, expert_outputs):
    if expert_outputs is None:
        raise ValueError("the orthogonality loss needs the expert outputs of the call")
    return selected_outputs(routing, expert_outputs)


def _global_losses(routing, lb, zc, vc, oc, expert_outputs, group):
    """Losses of the global batch: all-reduced sums, local gradient (see above)."""
    lse2 = torch.logsumexp(routing.logits, dim=-1).square().sum()
    dtype = lse2.dtype
    n = torch.tensor(float(routing.num_tokens), dtype=torch.float64, device=lse2.device)
    dist.all_reduce(n, group=group)
    n = n.clamp_min(1.0)
    losses = {
        "load_balance": load_balancing_loss(routing, global_batch=True, process_group=group),
        "z_loss": _all_reduce_with_grad(lse2, group) / n.to(dtype),
    }
    aux = lb * losses["load_balance"] + zc * losses["z_loss"]
    if vc > 0:
        s = selection_scores(routing)
        s1 = _all_reduce_with_grad(s.sum(0), group) / n.to(s.dtype)
        s2 = _all_reduce_with_grad(s.square().sum(0), group) / n.to(s.dtype)
        losses["variance"] = -(s2 - s1.square()).sum() / s.shape[1]
        aux = aux + vc * losses["variance"]
    if oc > 0:
        total = orthogonality_loss(_selected(routing, expert_outputs), reduction="sum")
        losses["orthogonality"] = _all_reduce_with_grad(total, group) / n.to(total.dtype)
        aux = aux + oc * losses["orthogonality"]
    return losses, aux
