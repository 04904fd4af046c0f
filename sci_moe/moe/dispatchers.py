"""Dispatch strategies of the :class:`~sci_moe.moe.MoE` layer.

The layer has one forward (route -> dispatch -> Default MoE -> base -> shared -> losses);
*where* the experts run is a strategy object, the ``dispatcher``:

* :class:`LocalDispatch` (the default): every expert on this process,
  :func:`~sci_moe.moe.dispatch` (sort by expert, grouped GEMM, weighted combine);
* :class:`~sci_moe.moe.parallel.ExpertParallel`: experts sharded over the ranks of a
  process group, rows moved by a differentiable all-to-all.

A dispatcher also says how per-batch statistics are reduced when the batch is split
over ranks (:meth:`Dispatcher.reduce_batch`, :meth:`Dispatcher.gather_rows`), so Default
MoE's EMA, expert-choice routing and capacity dropping see the same batch as the
single-process layer.
"""

from __future__ import annotations

import torch
from torch import nn

from .dispatch import dispatch
from .experts import ExpertBank
from .routing import Routing

__all__ = ["Dispatcher", "LocalDispatch"]


class Dispatcher:
    """Base class (and protocol) of a dispatch strategy.

    Subclasses override :meth:`__call__`; the other methods have the single-process
    meaning by default.

    Attributes
    ----------
    process_group : ProcessGroup or None
        The group the token batch is split over (``None``: not split by this
        dispatcher; global-batch losses then use the default group).
    shards_experts : bool
        Whether the layer's bank holds only this rank's slice of the experts.
    """

    process_group = None
    shards_experts = False

    def attach(self, moe: nn.Module) -> None:
        """Called once when a layer adopts this dispatcher (e.g. to shard its bank)."""

    def route(self, router: nn.Module, x: torch.Tensor) -> Routing:
        """Route ``x`` of shape ``(T, d_model)`` with ``router``."""
        return router(x)

    def __call__(
        self,
        x: torch.Tensor,
        routing: Routing,
        experts: ExpertBank,
        return_expert_outputs: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Routed part ``sum_j w_tj E_{i_tj}(x_t)`` (without the bank's :meth:`base`).

        Same contract as :func:`~sci_moe.moe.dispatch` with ``include_base=False``:
        ``x`` ``(T, d_in)`` -> ``(T, d_out)`` (and the expert outputs in the routing's
        plan order with ``return_expert_outputs``).
        """
        raise NotImplementedError

    def reduce_batch(self, t: torch.Tensor) -> torch.Tensor:
        """Sum of ``t`` over the ranks sharing the batch (no autograd); ``t`` locally."""
        return t

    def gather_rows(self, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        """All ranks' rows of ``t`` stacked in rank order, and this rank's first row.

        Locally ``(t, 0)``. Used by batch-level routing decisions (expert choice,
        capacity dropping); no autograd.
        """
        return t, 0

    def __deepcopy__(self, memo) -> Dispatcher:
        # Strategies hold process groups, which cannot be copied: copies share them.
        return self


class LocalDispatch(Dispatcher):
    """All experts on this process: :func:`~sci_moe.moe.dispatch` (the default)."""

    def __call__(self, x, routing, experts, return_expert_outputs=False):
        return dispatch(
            x, routing, experts, return_expert_outputs=return_expert_outputs, include_base=False
        )

    def __repr__(self) -> str:
        return "LocalDispatch()"
