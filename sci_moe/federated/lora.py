"""A frozen linear layer with ``M`` LoRA experts and a slot-expanded top-``M`` router."""

from __future__ import annotations

import torch
from torch import nn

from sci_moe.moe import LoRAExperts, Routing, SlotExpandedRouter, dispatch

__all__ = ["LoRAMixtureLinear"]


class LoRAMixtureLinear(nn.Module):
    """``y = W0 x + b0 + sum_e w_e(x) (alpha / r) B_e A_e x`` with FedLEASE routing.

    With one expert the layer is plain LoRA (weight 1, no router parameters are used);
    with ``M > 1`` experts a :class:`~sci_moe.moe.SlotExpandedRouter` picks the experts of
    each token around the client's *own* expert (:func:`~sci_moe.moe.slot_expanded_top_m`).

    Parameters
    ----------
    base_layer : nn.Linear
        Frozen pretrained projection (e.g. an attention query or value).
    num_experts : int
        ``M >= 1``.
    rank : int
        LoRA rank ``r``.
    alpha : float
        LoRA scale numerator (scale ``alpha / r``).
    router_init_std : float
        Initial standard deviation of the router ``G``.

    Attributes
    ----------
    bank : LoRAExperts
        ``lora_a`` of shape ``(M, r, d_in)``, ``lora_b`` of shape ``(M, d_out, r)``.
    router : sci_moe.moe.SlotExpandedRouter
        ``weight`` of shape ``(2M - 1, d_in)``.
    last_routing : Routing or None
        The routing of the last forward (for usage statistics).
    """

    def __init__(
        self,
        base_layer: nn.Linear,
        num_experts: int = 1,
        rank: int = 4,
        alpha: float = 8.0,
        router_init_std: float = 0.02,
    ) -> None:
        super().__init__()
        self.bank = LoRAExperts(base_layer, num_experts, rank, alpha)
        self.router = SlotExpandedRouter(base_layer.in_features, num_experts, router_init_std)
        self.last_routing: Routing | None = None

    @property
    def num_experts(self) -> int:
        """``M``."""
        return self.bank.num_experts

    def forward(self, x: torch.Tensor, own: int = 0) -> torch.Tensor:
        """Apply the layer to ``x`` of shape ``(..., d_in)``; returns ``(..., d_out)``."""
        return self.bank.base_layer(x) + self.update(x, own)

    def update(self, x: torch.Tensor, own: int = 0) -> torch.Tensor:
        """Only the routed low-rank term ``sum_e w_e (alpha / r) B_e A_e x``."""
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        if self.num_experts == 1:
            T = flat.shape[0]
            routing = Routing.from_assignments(
                torch.zeros(T, 1, dtype=torch.long, device=x.device),
                torch.ones(T, 1, dtype=x.dtype, device=x.device),
                1,
            )
        else:
            routing = self.router(flat, own)
        self.last_routing = routing
        return dispatch(flat, routing, self.bank, include_base=False).reshape(*lead, -1)
