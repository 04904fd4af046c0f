r"""Slot-expanded top-``M`` routing: an *own* expert that is always selected (FedLEASE).

* :func:`slot_expanded_top_m`: the slot-expanded top-``M`` gate of FedLEASE (Wang, Bian,
  Zhang and Xu, NeurIPS 2025, arXiv:2509.15087): ``2M - 1`` router slots, the first ``M``
  of which all point to one *own* expert, the other ``M - 1`` to the remaining experts;
  softmax over slots, top-``M`` slots, weights of duplicate slots summed per expert. The own
  expert is always selected and each token uses between 1 and ``M`` distinct experts.
* :func:`slot_to_expert`: the slot -> expert map.
* :class:`SlotExpandedRouter`: the learned linear slot scores :math:`G h` plus that gate,
  returning a core :class:`~sci_moe.moe.Routing` for any expert bank.

The gate needs the own expert of every token at call time, so it is a function producing a
:class:`~sci_moe.moe.Routing` (and a small module), not a :class:`~sci_moe.moe.Router`
option.
"""

from __future__ import annotations

import torch
from torch import nn

from .routing import Routing

__all__ = ["SlotExpandedRouter", "slot_expanded_top_m", "slot_to_expert"]


def _check_own(own: int | torch.Tensor, T: int, num_experts: int, device) -> torch.Tensor:
    if isinstance(own, bool):
        raise TypeError("own must be an int or an integer tensor, got a bool")
    if isinstance(own, int):
        own = torch.full((T,), own, dtype=torch.long, device=device)
    elif isinstance(own, torch.Tensor):
        if own.dtype.is_floating_point or own.dtype == torch.bool:
            raise TypeError(f"own must be an integer tensor, got {own.dtype}")
        if own.dim() == 0:
            own = own.expand(T)
        if own.shape != (T,):
            raise ValueError(f"own must be an int or shape ({T},), got {tuple(own.shape)}")
        own = own.to(device=device, dtype=torch.long)
    else:
        raise TypeError(f"own must be an int or an integer tensor, got {type(own).__name__}")
    if own.numel() and (int(own.min()) < 0 or int(own.max()) >= num_experts):
        raise ValueError(
            f"own expert ids must lie in [0, {num_experts - 1}], got values in "
            f"[{int(own.min())}, {int(own.max())}]"
        )
    return own


def slot_to_expert(own: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Expert of each of the ``2M - 1`` slots, per token.

    .. math:: e(p) = \\begin{cases} o & p < M \\\\ \\mathrm{others}(o)_{p - M} & p \\ge M
       \\end{cases}

    where :math:`\\mathrm{others}(o) = (0, \\dots, o - 1, o + 1, \\dots, M - 1)` lists the
    experts other than the own expert ``o`` in increasing order.

    Parameters
    ----------
    own : Tensor, shape (T,), int64
        Own expert of each token, in ``[0, M)``.
    num_experts : int
        ``M``.

    Returns
    -------
    Tensor, shape (T, 2M - 1), int64

    Examples
    --------
    >>> slot_to_expert(torch.tensor([0, 2]), 3).tolist()
    [[0, 0, 0, 1, 2], [2, 2, 2, 0, 1]]
    """
    M = num_experts
    j = torch.arange(M - 1, device=own.device)
    others = j.unsqueeze(0) + (j.unsqueeze(0) >= own.unsqueeze(1)).long()  # (T, M-1)
    return torch.cat([own.unsqueeze(1).expand(-1, M), others], 1)


def slot_expanded_top_m(
    slot_logits: torch.Tensor, own: int | torch.Tensor, *, normalize: bool = False
) -> Routing:
    """Slot-expanded adaptive top-``M`` routing (FedLEASE, arXiv:2509.15087, Sec. 3.3).

    With ``M`` experts and slot scores :math:`z \\in \\mathbb{R}^{2M-1}` per token,

    .. math::
        \\hat\\omega = \\mathrm{softmax}(z), \\qquad
        S = \\mathrm{TopM}(\\hat\\omega), \\qquad
        w_e = \\sum_{p \\in S,\\ e(p) = e} \\hat\\omega_p,

    where slots :math:`p < M` map to the own expert ``o`` and slots
    :math:`M \\le p \\le 2M - 2` to the other ``M - 1`` experts (:func:`slot_to_expert`). As
    only ``M - 1`` slots point elsewhere, at least one own slot is in ``S``: expert ``o`` is
    always used, and a token uses between 1 and ``M`` distinct experts. The layer output is
    :math:`y = \\mathrm{base}(x) + \\sum_e w_e\\, E_e(x)` (e.g. with
    :class:`~sci_moe.moe.LoRAExperts` and :func:`~sci_moe.moe.dispatch`).

    Parameters
    ----------
    slot_logits : Tensor, shape (T, 2M - 1)
        Slot scores :math:`z = G h`.
    own : int or Tensor, shape (T,)
        Own expert, one for all tokens or one per token.
    normalize : bool
        Divide the weights by :math:`\\sum_{p \\in S} \\hat\\omega_p` (the paper does not;
        default ``False``).

    Returns
    -------
    Routing
        ``indices`` of shape ``(T, M)``: column 0 is the own expert, column ``j >= 1`` the
        expert of slot ``M - 1 + j`` if selected, else ``M`` (a dropped slot, weight 0).
        ``weights`` the aggregated :math:`w_e` (differentiable in ``slot_logits``);
        ``probs`` of shape ``(T, M)`` the slot probabilities summed per expert over all
        slots, ``logits`` their logarithm.

    Examples
    --------
    >>> r = slot_expanded_top_m(torch.tensor([[0.0, 0.0, 5.0]]), own=0)
    >>> r.indices.tolist(), [round(w, 3) for w in r.weights[0].tolist()]
    ([[0, 1]], [0.007, 0.987])
    """
    if slot_logits.dim() != 2 or slot_logits.shape[1] % 2 != 1:
        raise ValueError(
            "slot_logits must have shape (T, 2M - 1) with an odd number of slots, got "
            f"{tuple(slot_logits.shape)}"
        )
    T, P = slot_logits.shape
    M = (P + 1) // 2
    own = _check_own(own, T, M, slot_logits.device)
    probs_slots = torch.softmax(slot_logits, dim=-1)
    top = torch.topk(probs_slots, M, dim=-1).indices  # (T, M)
    selected = torch.zeros(T, P, dtype=torch.bool, device=slot_logits.device)
    selected.scatter_(1, top, True)
    sel_probs = probs_slots * selected
    w_own = sel_probs[:, :M].sum(1, keepdim=True)
    w_other = sel_probs[:, M:]  # (T, M - 1)
    weights = torch.cat([w_own, w_other], 1)
    if normalize:
        weights = weights / sel_probs.sum(1, keepdim=True)
    experts = slot_to_expert(own, M)  # (T, 2M - 1)
    other_ids = experts[:, M:]
    other_idx = torch.where(selected[:, M:], other_ids, torch.full_like(other_ids, M))
    indices = torch.cat([own.unsqueeze(1), other_idx], 1)
    dtype = torch.promote_types(probs_slots.dtype, torch.float32)
    probs = torch.zeros(T, M, dtype=dtype, device=slot_logits.device)
    probs = probs.scatter_add(1, experts, probs_slots.to(dtype))
    return Routing.from_assignments(
        indices, weights, M, probs=probs, logits=probs.log().clamp_min(-1e4)
    )


class SlotExpandedRouter(nn.Module):
    """Learned slot-expanded top-``M`` router: :math:`z = G h`, then :func:`slot_expanded_top_m`.

    :math:`G \\in \\mathbb{R}^{(2M-1) \\times d}` (no bias), initialised
    :math:`\\mathcal{N}(0, \\sigma^2)` from the global generator (seed it first).

    Parameters
    ----------
    d_model : int
        Input size ``d``.
    num_experts : int
        ``M >= 1`` (``M = 1`` has one slot: the own expert with weight 1).
    init_std : float
        Standard deviation :math:`\\sigma` of the initial ``G``.
    normalize : bool
        See :func:`slot_expanded_top_m`.

    Examples
    --------
    >>> router = SlotExpandedRouter(8, num_experts=3)
    >>> r = router(torch.randn(5, 8), own=2)
    >>> bool((r.indices[:, 0] == 2).all()), r.indices.shape
    (True, torch.Size([5, 3]))
    """

    def __init__(
        self, d_model: int, num_experts: int, init_std: float = 0.02, normalize: bool = False
    ) -> None:
        super().__init__()
        for name, v in (("d_model", d_model), ("num_experts", num_experts)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if not init_std >= 0:
            raise ValueError(f"init_std must be >= 0, got {init_std!r}")
        self.d_model, self.num_experts, self.normalize = d_model, num_experts, bool(normalize)
        self.weight = nn.Parameter(torch.randn(2 * num_experts - 1, d_model) * init_std)

    @property
    def num_slots(self) -> int:
        """``2M - 1``."""
        return 2 * self.num_experts - 1

    def forward(self, x: torch.Tensor, own: int | torch.Tensor) -> Routing:
        """Route tokens ``x`` (shape ``(T, d)``) with own expert(s) ``own``."""
        if x.dim() != 2 or x.shape[1] != self.d_model:
            raise ValueError(f"x must have shape (T, {self.d_model}), got {tuple(x.shape)}")
        logits = x @ self.weight.to(x.dtype).t()
        return slot_expanded_top_m(logits, own, normalize=self.normalize)
