"""Auxiliary-loss-free balancing driven from the training loop."""

from __future__ import annotations

import torch
from torch import nn

from .routed import RoutedPath, routed_paths
from .router import Router
from .routing import Routing

__all__ = ["BiasBalancer"]


class BiasBalancer:
    """Update the selection bias of every biased router of a model after each step.

    The rule is DeepSeek-V3's (Wang et al. 2024, arXiv 2408.15664):
    ``b_i += rate * sign(mean(c) - c_i)`` with ``c_i`` the tokens routed to expert ``i``
    since the last update (summed over micro-batches). DeepSeek-V3 used ``rate = 1e-3``
    for most of training and 0 for the last tokens: :meth:`freeze` does the latter.

    Routers are found through :func:`~sci_moe.moe.routed_paths`: every
    :class:`~sci_moe.moe.MoE` and every field layer exposing ``routed_paths()`` (SPiCE's
    geometric MoE, the diffusion time mixture...) whose :class:`~sci_moe.moe.Router` has
    ``selection_bias=True``.

    Parameters
    ----------
    model : nn.Module
        Any module.
    rate : float, optional
        Overrides each router's ``bias_update_rate``.

    Attributes
    ----------
    routers : list of Router
        The balanced routers, in discovery order.
    layers : list of nn.Module
        Their owners (an owner with two biased routers appears twice).

    Examples
    --------
    >>> import torch
    >>> from sci_moe.moe import BiasBalancer, MoE
    >>> layer = MoE(d_model=8, num_experts=4, top_k=2, d_hidden=16, selection_bias=True)
    >>> balancer = BiasBalancer(layer)
    >>> len(balancer.routers)
    1
    >>> y, info = layer(torch.randn(64, 8), return_routing=True)
    >>> balancer.observe(layer, info.routing); balancer.step()
    >>> layer.router.expert_bias.shape  # overloaded experts' biases went down
    torch.Size([4])
    """

    def __init__(self, model: nn.Module, rate: float | None = None) -> None:
        paths = [
            p
            for p in routed_paths(model)
            if isinstance(p.router, Router) and p.router.config.selection_bias
        ]
        if not paths:
            raise ValueError(
                "no router with selection_bias=True in this model; build the layers "
                "with MoE(..., selection_bias=True) (or Router(..., selection_bias=True))"
            )
        if rate is not None and rate < 0:
            raise ValueError(f"rate must be >= 0, got {rate}")
        self.paths: list[RoutedPath] = []
        seen: set[int] = set()
        for p in paths:
            if id(p.router) not in seen:
                seen.add(id(p.router))
                self.paths.append(p)
        self.routers = [p.router for p in self.paths]
        self.layers = [p.owner for p in self.paths]
        self.rate = rate
        self.frozen = False
        self._loads: dict[int, torch.Tensor] = {}

    def _router_of(self, layer) -> Router:
        if isinstance(layer, RoutedPath):
            layer = layer.router
        if not isinstance(layer, Router):
            router = getattr(layer, "router", None)
            if not isinstance(router, Router):
                raise TypeError(
                    f"observe() needs a Router, an MoE or a RoutedPath, got "
                    f"{type(layer).__name__}; for a layer with several routers pass the "
                    "router that produced the routing"
                )
            layer = router
        return layer

    def observe(self, layer, routing: Routing) -> None:
        """Add the load of one routed call.

        Parameters
        ----------
        layer : MoE, Router or RoutedPath
            What produced ``routing`` (for a layer with several routers, the router).
        routing : Routing
        """
        key = id(self._router_of(layer))
        load = routing.load.detach()
        self._loads[key] = self._loads[key] + load if key in self._loads else load

    def step(self) -> None:
        """Apply one update to every observed router and reset the counts."""
        if not self.frozen:
            for path in self.paths:
                router = path.router
                load = self._loads.get(id(router))
                if load is None:
                    continue
                dispatcher = getattr(path.owner, "dispatcher", None)
                if dispatcher is not None:  # expert parallel: the load of the whole batch
                    load = dispatcher.reduce_batch(load)
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
