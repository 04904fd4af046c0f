"""Auxiliary-loss-free balancing driven from the training loop."""

from __future__ import annotations

import torch
from torch import nn

from .layer import MoE
from .routing import Routing

__all__ = ["BiasBalancer"]


class BiasBalancer:
    """Update the selection bias of every biased router of a model after each step.

    The rule is DeepSeek-V3's (Wang et al. 2024, arXiv 2408.15664):
    ``b_i += rate * sign(mean(c) - c_i)`` with ``c_i`` the tokens routed to expert ``i``
    since the last update (summed over micro-batches). DeepSeek-V3 used ``rate = 1e-3``
    for most of training and 0 for the last tokens: :meth:`freeze` does the latter.

    Parameters
    ----------
    model : nn.Module
        Any module; every :class:`~sci_moe.moe.MoE` inside whose router has
        ``selection_bias=True`` is balanced.
    rate : float, optional
        Overrides each router's ``bias_update_rate``.

    Examples
    --------
    >>> balancer = BiasBalancer(model)                        # doctest: +SKIP
    >>> y, info = layer(x, return_routing=True)               # doctest: +SKIP
    >>> balancer.observe(layer, info.routing); balancer.step()  # doctest: +SKIP
    """

    def __init__(self, model: nn.Module, rate: float | None = None) -> None:
        self.layers = [
            m for m in model.modules() if isinstance(m, MoE) and m.router.config.selection_bias
        ]
        if not self.layers:
            raise ValueError(
                "no MoE layer with selection_bias=True in this model; build the layers "
                "with MoE(..., selection_bias=True)"
            )
        if rate is not None and rate < 0:
            raise ValueError(f"rate must be >= 0, got {rate}")
        self.rate = rate
        self.frozen = False
        self._loads: dict[int, torch.Tensor] = {}

    def observe(self, layer: MoE, routing: Routing) -> None:
        """Add the load of one forward call of ``layer``."""
        key = id(layer)
        load = routing.load.detach()
        self._loads[key] = self._loads[key] + load if key in self._loads else load

    def step(self) -> None:
        """Apply one update to every observed layer and reset the counts."""
        if not self.frozen:
            for layer in self.layers:
                load = self._loads.get(id(layer))
                if load is None:
                    continue
                router = layer.router
                if self.rate is None:
                    router.update_bias(load)
                else:
                    with torch.no_grad():
                        b = router.expert_bias
                        b += self.rate * torch.sign(load.mean() - load).to(b.device)
        self._loads.clear()

    def freeze(self) -> None:
        """Stop updating (the biases keep their values)."""
        self.frozen = True
