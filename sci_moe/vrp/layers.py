"""MoSES linear layer: a frozen backbone linear with gated-LoRA basis experts.

From Pan et al., "Multi-Task Vehicle Routing Solver via Mixture of Specialized Experts
under State-Decomposable MDP" (NeurIPS 2025, arXiv 2510.21453). One LoRA expert per
basis constraint ``(O, B, L, TW)`` on the core's :class:`~sci_moe.moe.LoRAExperts`;
three modes, one per training stage:

* ``"backbone"`` (stage 1): :math:`h_{out} = W_0 h`.
* ``"expert"`` (stage 2, gated-LoRA expert, trained on its basis variant):
  :math:`h_{out} = 2\\sigma(\\langle w^g_i, h\\rangle + b^g_i)\\, W_0 h + B_i A_i h`.
  The factor 2 (ours) makes the zero-initialised gate the identity, so a fresh expert
  equals the backbone exactly; a token of a variant with several constraints averages
  the active experts' gate logits.
* ``"gated"`` (stage 3, adaptive gating):
  :math:`\\alpha = \\mathrm{act}(W^G h) \\in \\mathbb{R}^5`,
  :math:`h_{out} = \\alpha_0 W_0 h + \\sum_{i=1}^4 \\alpha_i B_i A_i h + \\hat B \\hat A h`
  with ``act`` sigmoid / softmax / norm_softplus (:func:`~sci_moe.moe.masked_dense_gate`)
  and routing ``"dense"`` (all four experts) or ``"exact"`` (variant-aware exact match: only the
  variant's constituents). ``W^G`` is the core :class:`~sci_moe.moe.Router`'s projection
  (zero-initialised); the weights are scaled so that a zero gate gives
  :math:`\\alpha = 1` for sigmoid (scale 2) and uniform weights summing to the number
  of allowed entries for softmax / norm_softplus.
"""

from __future__ import annotations

import torch
from torch import nn

from sci_moe.moe import GATE_SCORES, LoRAExperts, Router, Routing, dispatch, masked_dense_gate

__all__ = ["MODES", "ROUTINGS", "MoSESLinear"]

#: Modes of :class:`MoSESLinear`, one per training stage.
MODES = ("backbone", "expert", "gated")
#: Stage-3 routings: all four experts (``"dense"``) or only the variant's constituents.
ROUTINGS = ("dense", "exact")
_NUM_BASIS = 4


class MoSESLinear(nn.Module):
    """``nn.Linear`` with four basis LoRA experts, a residual LoRA and an adaptive gate.

    Parameters
    ----------
    d_in, d_out : int
    rank : int
        LoRA rank of every expert (0: a plain linear layer, no experts).
    gate_score : {"sigmoid", "softmax", "norm_softplus"}
    routing : {"exact", "dense"}

    Attributes
    ----------
    base : nn.Linear
        The backbone weight :math:`W_0` (trainable only in stage 1).
    experts : LoRAExperts or None
        Basis experts ``(O, B, L, TW)`` on ``base``.
    residual : LoRAExperts or None
        One residual LoRA :math:`\\hat B \\hat A`.
    expert_gate : nn.Linear or None
        Stage-2 gates :math:`w^g_i`, shape ``(4, d_in)``.
    router : Router or None
        Stage-3 gate :math:`W^G`, 5 outputs (backbone + 4 experts).
    mode : str
        One of :data:`MODES`.
    last_gate : Tensor or None, shape (..., 5)
        The stage-3 weights :math:`\\alpha` of the last forward (detached).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        rank: int = 8,
        gate_score: str = "sigmoid",
        routing: str = "exact",
    ) -> None:
        super().__init__()
        if gate_score not in GATE_SCORES:
            raise ValueError(f"gate_score must be one of {GATE_SCORES}, got {gate_score!r}")
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
        if rank < 0:
            raise ValueError(f"rank must be >= 0, got {rank}")
        self.base = nn.Linear(d_in, d_out)
        self.gate_score, self.routing, self.mode = gate_score, routing, "backbone"
        self.last_gate = None
        self.experts = self.residual = self.expert_gate = self.router = None
        if rank > 0:
            self.experts = LoRAExperts(self.base, _NUM_BASIS, rank)
            self.residual = LoRAExperts(self.base, 1, rank)
            self.base.requires_grad_(True)  # LoRAExperts froze it; stage 1 trains it
            self.expert_gate = nn.Linear(d_in, _NUM_BASIS)
            nn.init.zeros_(self.expert_gate.weight)
            nn.init.zeros_(self.expert_gate.bias)
            self.router = Router(
                d_model=d_in, num_experts=_NUM_BASIS + 1, mode="dense", score="sigmoid"
            )
            nn.init.zeros_(self.router.weight)

    def forward(self, x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
        """Apply the layer.

        Parameters
        ----------
        x : Tensor, shape (..., d_in)
        flags : Tensor, shape (..., 4), bool
            The constraints ``(O, B, L, TW)`` of each token's instance (broadcast to
            ``x``'s leading shape).

        Returns
        -------
        Tensor, shape (..., d_out)
        """
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "backbone" or self.experts is None:
            return self.base(x)
        lead = x.shape[:-1]
        h = x.reshape(-1, x.shape[-1])
        f = flags.expand(*lead, _NUM_BASIS).reshape(-1, _NUM_BASIS)
        T = h.shape[0]
        slots = torch.arange(_NUM_BASIS, device=h.device).expand(T, -1)
        if self.mode == "expert":
            g = self.expert_gate(h)
            n = f.sum(-1, keepdim=True)
            logit = (g * f).sum(-1, keepdim=True) / n.clamp(min=1)
            a0 = torch.where(n > 0, 2 * torch.sigmoid(logit), torch.ones_like(logit))
            weights = f.to(h.dtype)
        else:
            allowed = torch.ones(T, _NUM_BASIS + 1, dtype=torch.bool, device=h.device)
            if self.routing == "exact":
                allowed[:, 1:] = f
            n_allowed = allowed.sum(-1, keepdim=True).to(h.dtype)
            scale = 2.0 if self.gate_score == "sigmoid" else n_allowed
            logits = self.router.compute_logits(h).to(h.dtype)
            alpha = masked_dense_gate(logits, self.gate_score, allowed) * scale
            self.last_gate = alpha.detach().reshape(*lead, _NUM_BASIS + 1)
            a0, weights = alpha[:, :1], alpha[:, 1:]
            f = allowed[:, 1:]
        idx = torch.where(f, slots, torch.full_like(slots, _NUM_BASIS))
        routing = Routing.from_assignments(idx, weights * f, _NUM_BASIS)
        y = a0 * self.base(h) + dispatch(h, routing, self.experts, include_base=False)
        if self.mode == "gated":
            one = Routing.from_assignments(
                torch.zeros(T, 1, dtype=torch.long, device=h.device),
                torch.ones(T, 1, dtype=h.dtype, device=h.device),
                1,
            )
            y = y + dispatch(h, one, self.residual, include_base=False)
        return y.reshape(*lead, -1)
