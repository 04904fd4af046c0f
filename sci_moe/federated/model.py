"""The client model: a frozen adapted encoder layer, routed LoRA experts, one head per expert.

Parameters that travel between clients and server are grouped per expert: the expert
``e``'s LoRA slices of every adapted projection plus its classification head
(:meth:`FedLoRAClassifier.expert_state`), and each projection's router
(:meth:`FedLoRAClassifier.router_state`). Everything else is frozen and stays on the client.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .backbone import CLSAdaptedLayer

__all__ = ["FedLoRAClassifier", "ModelSpec"]


@dataclass
class ModelSpec:
    """How every client builds its model (the frozen layer and the LoRA shapes).

    Parameters
    ----------
    layer : nn.Module
        Frozen ``transformers`` ``BertLayer`` that gets LoRA on Q and V (the last layer of
        the encoder; the layers below it are precomputed into the inputs).
    num_attention_heads : int
    num_classes : int
        Size of the (shared) label space ``K``.
    rank : int
        LoRA rank ``r``.
    alpha : float
        LoRA scale numerator (scale ``alpha / r``).
    router_init_std : float
        Initial standard deviation of the routers.
    """

    layer: nn.Module
    num_attention_heads: int
    num_classes: int
    rank: int = 4
    alpha: float = 8.0
    router_init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("num_attention_heads", "num_classes", "rank"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha!r}")

    def build(self, num_experts: int = 1, seed: int = 0) -> FedLoRAClassifier:
        """A model with ``num_experts`` experts, initialised from ``seed``."""
        return FedLoRAClassifier(self, num_experts, seed)


class FedLoRAClassifier(nn.Module):
    """Classifier ``softmax(W_o z + b_o)`` on the adapted layer's token-0 output ``z``.

    ``o`` is the client's own expert: the head of its cluster. The LoRA update of each
    adapted projection is routed over all ``M`` experts (:class:`LoRAMixtureLinear`).

    Parameters
    ----------
    spec : ModelSpec
    num_experts : int
        ``M``.
    seed : int
        Seeds LoRA ``A`` (Kaiming uniform), the routers and the heads (``B = 0``).
    """

    def __init__(self, spec: ModelSpec, num_experts: int = 1, seed: int = 0) -> None:
        super().__init__()
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            self.encoder = CLSAdaptedLayer(
                spec.layer,
                spec.num_attention_heads,
                num_experts,
                spec.rank,
                spec.alpha,
                spec.router_init_std,
            )
            d = self.encoder.d_model
            w = torch.empty(num_experts, spec.num_classes, d)
            nn.init.normal_(w, std=d**-0.5)
            self.head_weight = nn.Parameter(w)
            self.head_bias = nn.Parameter(torch.zeros(num_experts, spec.num_classes))
        finally:
            torch.random.set_rng_state(state)
        self.num_experts = num_experts

    def prepare(self, hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Frozen precomputation of the inputs (see :meth:`CLSAdaptedLayer.prepare`)."""
        return self.encoder.prepare(hidden, mask)

    def forward(self, *inputs: torch.Tensor, own: int = 0) -> torch.Tensor:
        """Logits of shape ``(N, K)`` from prepared inputs."""
        z = self.encoder(*inputs, own=own)
        return z @ self.head_weight[own].t() + self.head_bias[own]

    # -- parameter groups that travel ------------------------------------------------
    def expert_state(self, e: int) -> dict[str, torch.Tensor]:
        """Expert ``e``'s LoRA slices (``{name}.lora_a`` ``(r, d_in)``, ``{name}.lora_b``
        ``(d_out, r)``) and head (``head.weight`` ``(K, d)``, ``head.bias`` ``(K,)``), cloned."""
        out = {}
        for name, lin in self.encoder.adapted.items():
            out[f"{name}.lora_a"] = lin.bank.lora_a[e].detach().clone()
            out[f"{name}.lora_b"] = lin.bank.lora_b[e].detach().clone()
        out["head.weight"] = self.head_weight[e].detach().clone()
        out["head.bias"] = self.head_bias[e].detach().clone()
        return out

    @torch.no_grad()
    def load_expert_state(self, e: int, state: dict[str, torch.Tensor]) -> None:
        """Set expert ``e`` from a dict shaped like :meth:`expert_state`."""
        for name, lin in self.encoder.adapted.items():
            lin.bank.lora_a[e].copy_(state[f"{name}.lora_a"])
            lin.bank.lora_b[e].copy_(state[f"{name}.lora_b"])
        self.head_weight[e].copy_(state["head.weight"])
        self.head_bias[e].copy_(state["head.bias"])

    def router_state(self) -> dict[str, torch.Tensor]:
        """Router ``G`` of each adapted projection, shape ``(2M - 1, d_in)``, cloned."""
        return {
            name: lin.router.weight.detach().clone() for name, lin in self.encoder.adapted.items()
        }

    @torch.no_grad()
    def load_router_state(self, state: dict[str, torch.Tensor]) -> None:
        """Set the routers from a dict shaped like :meth:`router_state`."""
        for name, lin in self.encoder.adapted.items():
            lin.router.weight.copy_(state[name])

    def trainable_parameters(self, own: int, train_router: bool) -> list[nn.Parameter]:
        """Parameters to optimise: the experts (gradients of experts other than ``own``
        are masked to 0, so they stay frozen under Adam or SGD) and optionally the routers."""
        experts = [self.head_weight, self.head_bias]
        routers = []
        for lin in self.encoder.adapted.values():
            experts += [lin.bank.lora_a, lin.bank.lora_b]
            routers.append(lin.router.weight)
        if self.num_experts > 1:
            keep = torch.zeros(self.num_experts)
            keep[own] = 1.0
            for p in experts:
                shape = (-1,) + (1,) * (p.dim() - 1)
                p.register_hook(lambda g, k=keep, s=shape: g * k.to(g.dtype).view(s))
        return experts + (routers if train_router and self.num_experts > 1 else [])

    def experts_used(self) -> dict[str, float]:
        """Mean number of distinct experts per token in the last forward, per projection."""
        out = {}
        for name, lin in self.encoder.adapted.items():
            r = lin.last_routing
            out[name] = float(r.kept.sum(1).float().mean()) if r is not None else float("nan")
        return out
