"""MoSES linear layer: a backbone linear and four basis LoRA experts as one routed layer.

From Pan et al., "Multi-Task Vehicle Routing Solver via Mixture of Specialized Experts
under State-Decomposable MDP" (NeurIPS 2025, arXiv 2510.21453). One LoRA expert per
basis constraint ``(O, B, L, TW)``; with the backbone :math:`W_0` they are the five
gated terms of :class:`BasisLoRAExperts` (expert 0 the backbone, experts 1-4 the basis
LoRAs), and :class:`MoSESLinear` is a :class:`~sci_moe.moe.RoutedModule` over them,
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
  with ``act`` sigmoid / softmax / norm_softplus: the core :class:`~sci_moe.moe.Router`
  in dense mode (``mode="dense"``, ``normalize=False``) with the allowed experts as its
  ``mask=`` (the mask applied before the normalisation), and routing ``"dense"`` (all
  four experts) or ``"exact"`` (variant-aware exact match: only the variant's
  constituents). ``W^G`` is the router's projection (zero-initialised); the weights are
  scaled so that a zero gate gives :math:`\\alpha = 1` for sigmoid (scale 2) and uniform
  weights summing to the number of allowed entries for softmax / norm_softplus. The
  residual LoRA :math:`\\hat B \\hat A` is the layer's always-on ``shared`` term.
"""

from __future__ import annotations

import torch
from torch import nn

from sci_moe.moe import (
    GATE_SCORES,
    ExpertBank,
    LoRAExperts,
    RoutedModule,
    Router,
    Routing,
)

__all__ = ["MODES", "ROUTINGS", "BasisLoRAExperts", "MoSESLinear"]

#: Modes of :class:`MoSESLinear`, one per training stage.
MODES = ("backbone", "expert", "gated")
#: Stage-3 routings: all four experts (``"dense"``) or only the variant's constituents.
ROUTINGS = ("dense", "exact")
_NUM_BASIS = 4


class BasisLoRAExperts(ExpertBank):
    """The backbone and the basis LoRA experts of a MoSES layer as one bank of ``M + 1``.

    .. math:: E_0(h) = W_0 h + b_0, \\qquad
              E_i(h) = \\frac{\\alpha}{r} B_i A_i h \\quad (i = 1, \\dots, M)

    Expert 0 is the backbone (the gated :math:`\\alpha_0 W_0 h` of MoSES), experts
    ``1..M`` the low-rank updates of :class:`~sci_moe.moe.LoRAExperts` (its
    initialisation: ``A`` as a linear layer's, ``B = 0``); no ungated base term. The
    parameters keep the names of :class:`~sci_moe.moe.LoRAExperts` (``base_layer``,
    ``lora_a``, ``lora_b``).

    Parameters
    ----------
    base_layer : nn.Linear
        The backbone :math:`W_0` (left trainable; the training stages choose).
    num_basis : int
        ``M`` LoRA experts.
    rank : int
        LoRA rank ``r >= 1``.
    alpha : float
        LoRA scale numerator (scale ``alpha / r``).

    Attributes
    ----------
    lora_a : Parameter, shape (M, r, d_in)
    lora_b : Parameter, shape (M, d_out, r)

    Examples
    --------
    >>> bank = BasisLoRAExperts(nn.Linear(6, 5), 4, rank=2)
    >>> bank.num_experts, bank.basis().num_experts
    (5, 4)
    """

    def __init__(
        self, base_layer: nn.Linear, num_basis: int, rank: int, alpha: float = 16.0
    ) -> None:
        super().__init__()
        lora = LoRAExperts(base_layer, num_basis, rank, alpha)
        self.base_layer = base_layer
        self.lora_a, self.lora_b = lora.lora_a, lora.lora_b
        self.rank, self.scale = lora.rank, lora.scale
        self.num_experts, self.d_in, self.d_out = num_basis + 1, lora.d_in, lora.d_out

    def basis(self) -> ExpertBank:
        """The ``M`` LoRA experts alone (experts ``1..M`` as ``0..M-1``), on these parameters.

        Runs exactly as :class:`~sci_moe.moe.LoRAExperts` does (one grouped GEMM per
        factor), without its base term.
        """
        return _Basis(self)

    def forward_sorted(self, x, plan):
        """All experts on rows sorted by expert (expert 0's rows first, the backbone)."""
        n0 = int(plan.counts[0])
        a = torch.cat([self.lora_a.new_zeros(1, *self.lora_a.shape[1:]), self.lora_a])
        b = torch.cat([self.lora_b.new_zeros(1, *self.lora_b.shape[1:]), self.lora_b])
        low = self.scale * self.grouped_linear(self.grouped_linear(x, a, plan), b, plan)
        return torch.cat([low[:n0] + self.base_layer(x[:n0]), low[n0:]])

    def forward_expert(self, e, x):
        """Expert ``e`` on rows ``x``: the backbone for ``e = 0``, else LoRA ``e - 1``."""
        if e == 0:
            return self.base_layer(x)
        F = nn.functional
        return self.scale * F.linear(F.linear(x, self.lora_a[e - 1]), self.lora_b[e - 1])


class _Basis(ExpertBank):
    """The LoRA experts of a :class:`BasisLoRAExperts`, read through it at every call."""

    def __init__(self, bank: BasisLoRAExperts) -> None:
        super().__init__()
        object.__setattr__(self, "_bank", bank)  # a view, not a submodule
        self.num_experts, self.d_in, self.d_out = bank.num_experts - 1, bank.d_in, bank.d_out

    def forward_sorted(self, x, plan):
        b = self._bank
        return b.scale * self.grouped_linear(self.grouped_linear(x, b.lora_a, plan), b.lora_b, plan)

    def forward_expert(self, e, x):
        return self._bank.forward_expert(e + 1, x)


class _ResidualLoRA(LoRAExperts):
    """One always-on LoRA update :math:`\\hat B \\hat A h` (the layer's ``shared`` term)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``scale * B A x`` for rows ``x`` of shape ``(T, d_in)`` (no base term)."""
        F = nn.functional
        return self.scale * F.linear(F.linear(x, self.lora_a[0]), self.lora_b[0])


class MoSESLinear(RoutedModule):
    """``nn.Linear`` with four basis LoRA experts, a residual LoRA and an adaptive gate.

    MoSES's routed layer: a :class:`~sci_moe.moe.RoutedModule` over the five gated terms
    of :class:`BasisLoRAExperts` (expert 0 the backbone :math:`W_0`, experts 1-4 the
    basis LoRAs); :meth:`route` gives each token its weights :math:`(\\alpha_0, \\dots,
    \\alpha_4)` for the current :attr:`mode` (the variant's constraints ``flags``
    decide which experts are allowed; a disallowed expert is a dropped slot), and in
    the gated mode the residual LoRA is the always-on ``shared`` term. Call it as
    ``layer(x, flags=flags)``.

    Parameters
    ----------
    d_in, d_out : int
    rank : int
        LoRA rank of every expert (0: a plain linear layer, no experts and no routing).
    gate_score : {"sigmoid", "softmax", "norm_softplus"}
    routing : {"exact", "dense"}

    Attributes
    ----------
    base : nn.Linear
        The backbone weight :math:`W_0` (trainable only in stage 1).
    experts : BasisLoRAExperts or None
        Expert 0 the backbone (``base``), experts 1-4 the basis LoRAs ``(O, B, L, TW)``.
    residual : LoRAExperts or None
        One residual LoRA :math:`\\hat B \\hat A` (``shared`` in the gated mode).
    expert_gate : nn.Linear or None
        Stage-2 gates :math:`w^g_i`, shape ``(4, d_in)``.
    router : Router or None
        Stage-3 gate :math:`W^G`: ``mode="dense"`` with ``score=gate_score`` and
        ``normalize=False``, 5 outputs (backbone + 4 experts).
    mode : str
        One of :data:`MODES`.
    last_gate : Tensor or None, shape (..., 5)
        The stage-3 weights :math:`\\alpha` of the last routed call (detached).
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
        self.d_model = d_in
        self.base = nn.Linear(d_in, d_out)
        self.gate_score, self.routing, self.mode = gate_score, routing, "backbone"
        self.last_gate = None
        self.experts = self.residual = self.expert_gate = self.router = None
        if rank > 0:
            self.experts = BasisLoRAExperts(self.base, _NUM_BASIS, rank)
            self.residual = _ResidualLoRA(self.base, 1, rank)
            self.base.requires_grad_(True)  # LoRAExperts froze it; stage 1 trains it
            self.expert_gate = nn.Linear(d_in, _NUM_BASIS)
            nn.init.zeros_(self.expert_gate.weight)
            nn.init.zeros_(self.expert_gate.bias)
            self.router = Router(
                d_model=d_in,
                num_experts=_NUM_BASIS + 1,
                mode="dense",
                score=gate_score,
                normalize=False,
            )
            nn.init.zeros_(self.router.weight)

    @property
    def shared(self) -> nn.Module | None:
        """The residual LoRA in the gated mode (the always-on term), else ``None``."""
        return self.residual if self.mode == "gated" else None

    def route(self, x: torch.Tensor, *, flags: torch.Tensor) -> Routing:
        """The weights of the backbone and the four basis experts for the current mode.

        Parameters
        ----------
        x : Tensor, shape (T, d_in)
        flags : Tensor, shape (T, 4), bool
            The constraints ``(O, B, L, TW)`` of each token's instance.

        Returns
        -------
        Routing
            Over the 5 experts of :class:`BasisLoRAExperts`: slot ``j`` is expert ``j``,
            or dropped (index 5, weight 0) where the expert is not allowed. Backbone
            mode: the backbone alone with weight 1; expert mode: ``2 sigma(gate)`` for the
            backbone and 1 for the instance's experts; gated mode: the scaled dense gate
            :math:`\\alpha`.
        """
        T = x.shape[0]
        E = _NUM_BASIS + 1
        self._check_flags(flags, T)
        allowed = torch.ones(T, E, dtype=torch.bool, device=x.device)
        logits = probs = None
        if self.mode == "backbone":
            allowed[:, 1:] = False
            weights = allowed.to(x.dtype)
        elif self.mode == "expert":
            a0 = self._expert_gate(x, flags)
            allowed[:, 1:] = flags
            weights = torch.cat([a0, flags.to(x.dtype)], 1)
        else:
            if self.routing == "exact":
                allowed[:, 1:] = flags
            gate = self.router(x, mask=allowed)
            weights = self._gated_weights(x, gate, allowed)
            logits, probs = gate.logits, gate.probs
        slots = torch.arange(E, device=x.device).expand(T, -1)
        indices = torch.where(allowed, slots, torch.full_like(slots, E))
        if logits is None:
            return Routing.from_assignments(indices, weights, E)
        return Routing(indices, weights, logits, probs, E)

    @staticmethod
    def _check_flags(flags: torch.Tensor, T: int) -> None:
        if flags.shape != (T, _NUM_BASIS) or flags.dtype != torch.bool:
            raise ValueError(
                f"flags must be a bool tensor of shape ({T}, {_NUM_BASIS}), got "
                f"{flags.dtype} {tuple(flags.shape)}"
            )

    def _expert_gate(self, x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """Stage 2's backbone weight ``2 sigma(mean of the active gates)``, shape (T, 1)."""
        return self._expert_gate_from(self.expert_gate(x), f)

    @staticmethod
    def _expert_gate_from(g: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        n = f.sum(-1, keepdim=True)
        logit = (g * f).sum(-1, keepdim=True) / n.clamp(min=1)
        return torch.where(n > 0, 2 * torch.sigmoid(logit), torch.ones_like(logit))

    def _gated_weights(self, x: torch.Tensor, gate: Routing, allowed: torch.Tensor):
        """Stage 3's scaled weights :math:`\\alpha` (T, 5) of the router's dense ``gate``."""
        n_allowed = allowed.sum(-1, keepdim=True).to(x.dtype)
        scale = 2.0 if self.gate_score == "sigmoid" else n_allowed
        weights = gate.weights.to(x.dtype) * scale
        self.last_gate = weights.detach()
        return weights

    def _forward_fast(self, x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
        """The routed sum of :meth:`route` + :meth:`run_experts` (+ the residual) for the
        ``(T, d_in)`` rows ``x``, without building the :class:`~sci_moe.moe.Routing`.

        A MoSES layer is called about a hundred times per rollout, on a few hundred rows:
        there the routing's bookkeeping (slots, indices, the scores and logits that only
        the auxiliary losses and diagnostics read) and the number of small products cost
        more than the arithmetic. So the low-rank products that read ``x`` (the experts'
        ``A`` with the residual's ``A`` or the stage-2 gates) are one GEMM on the stacked
        weights, and the up-projections (the experts' ``B`` weighted per token, the
        residual's) one more, accumulated onto ``alpha_0 W_0 x`` (the backbone product
        stays separate, so that zero LoRAs give the backbone exactly):

        .. math:: y = \\alpha_0 (W_0 x + b_0) + [\\,s\\, w \\odot A x,\\; \\hat s \\hat A x\\,]
                  \\,[B;\\ \\hat B]^\\top

        The same sum as the routed call up to floating-point reassociation (checked by
        the tests; about 1.7x less time per stage-2 layer call with its backward, at 800
        rows); the stage-3 router is still called as a module (its hooks see it).
        """
        self._check_flags(flags, x.shape[0])
        F = nn.functional
        bank = self.experts
        M, r = bank.lora_a.shape[:2]
        d_out = self.base.out_features
        a = bank.lora_a.reshape(M * r, -1)
        up = bank.lora_b.permute(0, 2, 1).reshape(M * r, d_out)
        if self.mode == "expert":
            gate = self.expert_gate
            w_in, b_in = torch.cat([a, gate.weight]), torch.cat([a.new_zeros(M * r), gate.bias])
            low, g = F.linear(x, w_in, b_in).split([M * r, _NUM_BASIS], 1)
            a0 = self._expert_gate_from(g, flags)
            w = flags.to(x.dtype) * bank.scale
        else:
            res = self.residual
            low, low_res = (x @ torch.cat([a, res.lora_a[0]]).T).split([M * r, r], 1)
            allowed = torch.ones(x.shape[0], _NUM_BASIS + 1, dtype=torch.bool, device=x.device)
            if self.routing == "exact":
                allowed[:, 1:] = flags
            weights = self._gated_weights(x, self.router(x, mask=allowed), allowed)
            a0, w = weights[:, :1], weights[:, 1:]
            w = torch.where(allowed[:, 1:], w, torch.zeros_like(w)) * bank.scale
            up = torch.cat([up, res.lora_b[0].T])
        low = (low.view(-1, M, r) * w[:, :, None]).reshape(-1, M * r)
        if self.mode == "gated":
            low = torch.cat([low, low_res * res.scale], 1)
        return torch.addmm(a0 * self.base(x), low, up)

    def run_experts(self, x: torch.Tensor, routing: Routing) -> torch.Tensor:
        """``alpha_0 W_0 x + sum_i alpha_i B_i A_i x``: the backbone once, the LoRAs as two
        dense products over all four experts.

        Four experts of rank ``r`` make the low-rank paths of every token ``(T, 4r)``: two
        dense products cost less than sorting the tokens by expert for a dispatch (about
        three times less time per MoSES layer call in the rollouts); a dropped (disallowed)
        expert has weight 0. The same sum as :func:`~sci_moe.moe.dispatch` over
        :meth:`BasisLoRAExperts.basis` (checked against the naive loop by
        :func:`~sci_moe.testing.assert_routed_module`).
        """
        bank = self.experts
        M, r = bank.lora_a.shape[:2]
        a0, weights = routing.weights[:, :1], routing.weights[:, 1:]
        w = torch.where(routing.kept[:, 1:], weights, torch.zeros_like(weights))
        low = x @ bank.lora_a.reshape(M * r, -1).T  # (T, M r)
        low = (low.view(-1, M, r) * w[:, :, None]).reshape(-1, M * r)
        up = bank.lora_b.permute(0, 2, 1).reshape(M * r, -1)  # (M r, d_out)
        return a0 * self.base(x) + bank.scale * (low @ up)

    def forward(
        self,
        x: torch.Tensor,
        routing: Routing | None = None,
        *,
        return_routing: bool = False,
        flags: torch.Tensor | None = None,
    ):
        """Apply the layer.

        Parameters
        ----------
        x : Tensor, shape (..., d_in)
        routing : Routing, optional
            A routing of :meth:`route` for the flattened tokens (then no ``flags``).
        return_routing : bool
            Also return the :class:`~sci_moe.moe.MoEInfo` (not for ``rank=0``).
        flags : Tensor, shape (..., 4), bool
            The constraints ``(O, B, L, TW)`` of each token's instance (broadcast to
            ``x``'s leading shape); needed unless the mode is ``"backbone"``.

        Returns
        -------
        Tensor, shape (..., d_out)
            And the :class:`~sci_moe.moe.MoEInfo` with ``return_routing=True``.
        """
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.experts is None:
            if routing is not None or return_routing:
                raise ValueError("a MoSESLinear with rank=0 has no experts to route")
            return self.base(x)
        if routing is not None:
            return super().forward(x, routing, return_routing=return_routing)
        if self.mode == "backbone" and not return_routing:
            return self.base(x)
        if flags is None:
            raise ValueError("MoSESLinear needs flags= (the constraints of each token's instance)")
        lead = x.shape[:-1]
        f = flags.expand(*lead, _NUM_BASIS).reshape(-1, _NUM_BASIS)
        if return_routing or x.dim() < 1 or x.shape[-1] != self.d_model:
            out = super().forward(x, return_routing=return_routing, flags=f)
        else:  # the same sum without the routing record
            out = self._forward_fast(x.reshape(-1, self.d_model), f)
            out = out.reshape(*lead, out.shape[-1])
        if self.mode == "gated":
            self.last_gate = self.last_gate.reshape(*lead, _NUM_BASIS + 1)
        return out

    def routed_paths(self):
        """The layer's path (router -> basis bank); none for ``rank=0``."""
        return [] if self.experts is None else super().routed_paths()
