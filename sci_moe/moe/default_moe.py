"""Default MoE: dense router gradients from an EMA of each expert's output.

Panda et al., "Dense Backpropagation Improves Training for Sparse Mixture-of-Experts"
(NeurIPS 2025, arXiv 2504.12463).
"""

from __future__ import annotations

import torch
from torch import nn

from .routing import Routing

__all__ = ["DefaultOutputs"]


class DefaultOutputs(nn.Module):
    """Per-expert default outputs ``Ê_i`` that stand in for experts a token did not use.

    .. math::

        \\hat E_i^{(t)} = \\beta\\,\\hat E_i^{(t-1)} + (1-\\beta)\\,
            \\mathrm{mean}\\{E_i(x) : x \\text{ routed to } i\\}

        y = \\sum_{i \\in A(x)} w_i E_i(x) + \\sum_{i \\notin A(x)} \\pi_i \\hat E_i

    (Eqs. 10-11 of the paper). The EMA is updated from this batch's routed outputs
    *first* and then used in the same step; ``Ê`` is detached, so the extra term only
    gives the router a gradient (through every ``π_i``), never the experts. ``π`` are the
    router scores (``Routing.probs``), ``w`` the usual routed weights.

    Parameters
    ----------
    num_experts, d_out : int
    beta : float
        EMA decay in ``[0, 1)``. The paper uses 0.9 for 8 experts and, with 32 experts,
        0.65 (k=1), 0.95 (k=2), 0.999 (k=4).
    scored : bool
        "Scored" update: average ``π_i(x) E_i(x)`` weighted by the router score,
        ``Σ π_i E_i / Σ π_i`` over the tokens routed to ``i`` (the paper reports it
        removes the sensitivity to ``beta``; its exact normalisation is not given, this
        is the probability-weighted mean).
    at_inference : bool
        Also add the default term in eval mode (off by default: no effect at inference).

    Attributes
    ----------
    ema : Tensor
        Buffer of shape ``(num_experts, d_out)``; zero at initialisation (the paper
        found zero better than Gaussian); saved in ``state_dict``.
    """

    def __init__(
        self,
        num_experts: int,
        d_out: int,
        beta: float = 0.9,
        scored: bool = False,
        at_inference: bool = False,
    ) -> None:
        super().__init__()
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        self.beta, self.scored, self.at_inference = beta, scored, at_inference
        self.register_buffer("ema", torch.zeros(num_experts, d_out))

    def extra_repr(self) -> str:
        return f"beta={self.beta}, scored={self.scored}, at_inference={self.at_inference}"

    @torch.no_grad()
    def update(self, routing: Routing, expert_outputs: torch.Tensor, reduce=None) -> None:
        """EMA step from the unweighted routed outputs of one batch.

        Parameters
        ----------
        routing : Routing
        expert_outputs : Tensor, shape (routing.plan.num_kept, d_out)
            Expert order, as returned by ``dispatch(..., return_expert_outputs=True)``.
        reduce : callable, optional
            Sums a tensor over the ranks that share the batch (e.g.
            :meth:`Dispatcher.reduce_batch <sci_moe.moe.Dispatcher.reduce_batch>` of an
            expert-parallel layer), so the per-expert means, and hence the EMA, are
            those of the whole batch on every rank.
        """
        plan = routing.plan
        kept = plan.num_kept
        expert = plan.expert[:kept]
        ys = expert_outputs.detach().to(self.ema.dtype)
        E = self.ema.shape[0]
        if self.scored:
            p = routing.probs.detach()[plan.token[:kept], expert].to(ys.dtype)
            sums = torch.zeros_like(self.ema).index_add_(0, expert, ys * p.unsqueeze(-1))
            norm = torch.zeros(E, dtype=ys.dtype, device=ys.device).index_add_(0, expert, p)
        else:
            sums = torch.zeros_like(self.ema).index_add_(0, expert, ys)
            norm = plan.counts.to(ys.dtype)
        if reduce is not None:
            stats = reduce(torch.cat([sums, norm.to(sums.dtype).unsqueeze(-1)], dim=1))
            sums, norm = stats[:, :-1], stats[:, -1]
        used = norm > 0
        mean = sums[used] / norm[used].unsqueeze(-1)
        self.ema[used] = self.beta * self.ema[used] + (1.0 - self.beta) * mean

    def forward(self, routing: Routing) -> torch.Tensor:
        """The default term ``Σ_{i∉A(x)} π_i Ê_i``, shape ``(T, d_out)``."""
        probs = routing.probs
        kept = routing.kept
        idx = torch.where(kept, routing.indices, torch.zeros_like(routing.indices))
        hits = torch.zeros(probs.shape, dtype=torch.int32, device=probs.device)
        selected = hits.scatter_add_(1, idx, kept.to(torch.int32)) > 0
        pi = probs.masked_fill(selected, 0.0)
        return pi @ self.ema.to(pi.dtype)

    def active(self) -> bool:
        """Whether the default term is applied now (training, or ``at_inference``)."""
        return self.training or self.at_inference
