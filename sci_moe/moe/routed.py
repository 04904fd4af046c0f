"""The routed-module skeleton every paper's routed layer builds on, and its discovery.

:class:`RoutedModule` is the base class of every routed layer (:class:`~sci_moe.moe.MoE`
is one): flatten the tokens, :meth:`~RoutedModule.route` them, run the experts
(:meth:`~RoutedModule.run_experts`), add the always-on ``shared`` module, reshape, and
keep the call's routing and auxiliary losses in an :class:`MoEInfo`. A paper's layer
subclasses it and overrides only what differs (a router that needs extra inputs, experts
that are whole networks, its own auxiliary losses).

A *routed path* is one router (or fixed gate) feeding one expert bank. A
:class:`RoutedModule` has one by default; SPiCE's geometric MoE has two (scalars,
vectors). Any module exposes its paths by defining ``routed_paths(self) ->
list[RoutedPath]``; :func:`routed_paths` walks a model and collects them, so
:class:`~sci_moe.moe.BiasBalancer`, :class:`~sci_moe.moe.cap.CapRecorder` and
:meth:`ModelSpec.from_module <sci_moe.moe.cap.ModelSpec.from_module>` see every routed
layer. :func:`sci_moe.testing.assert_routed_module` checks every :class:`RoutedModule`
call of a model against the naive per-token loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .dispatch import dispatch
from .experts import ExpertBank
from .routing import Routing

__all__ = ["MoEInfo", "RoutedModule", "RoutedPath", "routed_paths"]


@dataclass
class MoEInfo:
    """What one routed-layer call routed and the auxiliary losses it produced.

    Attributes
    ----------
    routing : Routing
        The routing used in the call.
    losses : dict of str to Tensor
        Unweighted auxiliary losses (for :class:`~sci_moe.moe.MoE`: ``"load_balance"``,
        ``"z_loss"``, and ``"orthogonality"`` / ``"variance"`` when their coefficients
        are set; for a :class:`RoutedModule`: :meth:`RoutedModule.auxiliary_losses`).
    aux_loss : Tensor
        What to add to the training loss: for :class:`~sci_moe.moe.MoE` the weighted sum
        ``load_balance_coef * L_bal + z_loss_coef * L_z`` (plus
        ``orthogonality_coef * L_o + variance_coef * L_v`` when set); for a
        :class:`RoutedModule` the sum of its (already weighted) ``losses``.
    expert_outputs : Tensor or None, shape (num_kept, d_out)
        Unweighted expert outputs in expert order when the call computed them (Default
        MoE or the orthogonality loss), for :func:`~sci_moe.moe.routing_diagnostics`.
    """

    routing: Routing
    losses: dict[str, torch.Tensor]
    aux_loss: torch.Tensor
    expert_outputs: torch.Tensor | None = None


@dataclass(frozen=True, eq=False)
class RoutedPath:
    """One router -> expert-bank path of a routed layer.

    Attributes
    ----------
    owner : nn.Module
        The layer that holds the path (an :class:`~sci_moe.moe.MoE`, a field layer).
    router : nn.Module
        Module whose forward returns the path's :class:`~sci_moe.moe.Routing` (a
        :class:`~sci_moe.moe.Router`, or a fixed gate module); tools hook it to see
        every routing. ``None`` only if the path is never routed by a module.
    experts : nn.Module
        The routed experts: an :class:`~sci_moe.moe.ExpertBank` (stacked weights) or a
        container of ``num_experts`` expert modules (e.g. ``nn.ModuleList``).
    num_experts : int
        ``E``.
    top_k : int
        Experts per token.
    d_model : int
        Token feature size the path's experts read.
    shared : nn.Module, optional
        Always-on experts of the path.
    name : str
        Label of the path inside its owner (``""`` for single-path layers; SPiCE uses
        ``"scalar"`` and ``"vector"``).
    num_shared_experts : int
        Shared experts fused in ``shared`` (for MoE-CAP's parameter counts).
    """

    owner: nn.Module
    router: nn.Module | None
    experts: nn.Module
    num_experts: int
    top_k: int
    d_model: int
    shared: nn.Module | None = None
    name: str = ""
    num_shared_experts: int = 0

    def __post_init__(self) -> None:
        if self.num_experts < 1 or not 1 <= self.top_k <= self.num_experts:
            raise ValueError(
                f"a routed path needs num_experts >= 1 and 1 <= top_k <= num_experts; got "
                f"num_experts={self.num_experts}, top_k={self.top_k}"
            )

    @property
    def label(self) -> str:
        """``"OwnerClass"`` or ``"OwnerClass/name"``."""
        cls = type(self.owner).__name__
        return f"{cls}/{self.name}" if self.name else cls


class RoutedModule(nn.Module):
    """Base class of routed layers: flatten -> route -> experts (+ shared) -> reshape.

    .. math:: y_t = \\sum_j w_{tj}\\, E_{i_{tj}}(x_t) \\;(+\\ \\mathrm{base}(x_t))
              \\;(+\\ \\mathrm{shared}(x_t))

    with the routing ``(i, w)`` of :meth:`route` and ``base`` the bank's ungated term
    (:meth:`ExpertBank.base <sci_moe.moe.ExpertBank.base>`). A subclass sets the
    attributes below in its ``__init__`` (after ``super().__init__()``) and overrides
    only what differs: :meth:`route` (a router that needs more inputs, e.g. each
    token's own expert), :meth:`run_experts` (experts that are not a bank),
    :meth:`auxiliary_losses` (its balancing terms).

    Attributes
    ----------
    d_model : int
        Feature size of the tokens (last axis of the input).
    router : nn.Module or None
        Called by the default :meth:`route` as ``router(x, **route_kwargs)`` on the
        ``(T, d_model)`` rows; returns a :class:`~sci_moe.moe.Routing` (a
        :class:`~sci_moe.moe.Router` in any mode, or a fixed gate). ``None`` only when
        :meth:`route` is overridden.
    experts : ExpertBank or sequence of nn.Module
        The routed experts: a bank (stacked weights, grouped GEMMs) or a container of
        ``E`` expert modules (``nn.ModuleList``), both run by
        :func:`~sci_moe.moe.dispatch`.
    shared : nn.Module or None
        Always-on module added to every token (``(T, d_model) -> (T, d_out)``).

    Examples
    --------
    A top-1 mixture whose router also reads a per-token condition:

    >>> from sci_moe.moe import LinearExperts, Router
    >>> class Conditioned(RoutedModule):
    ...     def __init__(self, d):
    ...         super().__init__()
    ...         self.d_model = d
    ...         self.router = Router(d_model=d + 1, num_experts=4, top_k=1)
    ...         self.experts = LinearExperts(4, d, d)
    ...     def route(self, x, *, cond):
    ...         return self.router(torch.cat([x, cond.reshape(-1, 1)], -1))
    >>> layer = Conditioned(8)
    >>> y, info = layer(torch.randn(2, 5, 8), cond=torch.zeros(2, 5), return_routing=True)
    >>> y.shape, info.routing.indices.shape
    (torch.Size([2, 5, 8]), torch.Size([10, 1]))
    """

    # Annotations only: a class-level ``None`` would shadow the submodules that
    # nn.Module keeps in ``_modules``. Unset ``router``/``shared`` read as None.
    d_model: int
    router: nn.Module | None
    experts: nn.Module
    shared: nn.Module | None

    def _part(self, name: str) -> nn.Module | None:
        try:
            return getattr(self, name)
        except AttributeError:
            return None

    def route(self, x: torch.Tensor, **route_kwargs) -> Routing:
        """The routing of the ``(T, d_model)`` rows ``x`` (default ``self.router(x, ...)``)."""
        router = self._part("router")
        if router is None:
            raise ValueError(
                f"{type(self).__name__} has no router: set self.router or override route()"
            )
        return router(x, **route_kwargs)

    def run_experts(self, x: torch.Tensor, routing: Routing) -> torch.Tensor:
        """The routed experts' output ``(T, d_out)`` (default :func:`~sci_moe.moe.dispatch`)."""
        return dispatch(x, routing, self.experts)

    def auxiliary_losses(self, x: torch.Tensor, routing: Routing) -> dict[str, torch.Tensor]:
        """Weighted auxiliary losses of a call, by name (default none).

        Only computed with ``return_routing=True``; their sum is
        :attr:`MoEInfo.aux_loss`.
        """
        return {}

    def forward(
        self,
        x: torch.Tensor,
        routing: Routing | None = None,
        *,
        return_routing: bool = False,
        **route_kwargs,
    ) -> torch.Tensor | tuple[torch.Tensor, MoEInfo]:
        """Apply the layer.

        Parameters
        ----------
        x : Tensor, shape (..., d_model)
        routing : Routing, optional
            A routing computed earlier for the ``prod(...)`` flattened tokens; by
            default :meth:`route` computes it.
        return_routing : bool
            Also return an :class:`MoEInfo` (routing, :meth:`auxiliary_losses` and
            their sum).
        **route_kwargs
            Passed to :meth:`route` (e.g. ``own=`` for a slot-expanded router).

        Returns
        -------
        y : Tensor, shape (..., d_out)
        info : MoEInfo
            Only with ``return_routing=True``.
        """
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"{type(self).__name__} expects inputs of shape (..., {self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        shape = x.shape
        x2 = x.reshape(-1, self.d_model)
        if routing is None:
            routing = self.route(x2, **route_kwargs)
        elif route_kwargs:
            raise ValueError(
                f"route options {sorted(route_kwargs)} given with a precomputed routing; "
                "pass one or the other"
            )
        y = self.run_experts(x2, routing)
        shared = self._part("shared")
        if shared is not None:
            y = y + shared(x2)
        y = y.reshape(*shape[:-1], y.shape[-1])
        if not return_routing:
            return y
        losses = self.auxiliary_losses(x2, routing)
        aux = x2.new_zeros((), dtype=torch.promote_types(x2.dtype, torch.float32))
        for value in losses.values():
            aux = aux + value
        return y, MoEInfo(routing, losses, aux)

    @property
    def num_experts(self) -> int:
        """Routed experts ``E``."""
        e = self.experts
        return e.num_experts if isinstance(e, ExpertBank) else len(e)

    def routed_paths(self) -> list[RoutedPath]:
        """One :class:`RoutedPath` (``router -> experts``); override for several."""
        E, router, shared = self.num_experts, self._part("router"), self._part("shared")
        return [
            RoutedPath(
                owner=self,
                router=router,
                experts=self.experts,
                num_experts=E,
                top_k=int(getattr(router, "top_k", E)),
                d_model=self.d_model,
                shared=shared,
                num_shared_experts=int(shared is not None),
            )
        ]


def routed_paths(model: nn.Module) -> list[RoutedPath]:
    """Every routed path of ``model``, in ``model.modules()`` order.

    The protocol: a module is a routed layer for the tools if it defines a method
    ``routed_paths(self) -> list[RoutedPath]`` returning its router -> experts paths in
    a fixed order. Every :class:`RoutedModule` has it (one path, or the override of a
    layer with several, e.g. SPiCE's scalar and vector paths); any other module may
    define it. The submodules of a routed layer are still visited (a layer nested
    inside another is found too), but a path is reported once even if reachable from
    several owners.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    list of RoutedPath
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    out, seen = [], set()
    for m in model.modules():
        if getattr(type(m), "routed_paths", None) is None:
            continue
        for path in m.routed_paths():
            key = (id(path.router), id(path.experts))
            if key not in seen:
                seen.add(key)
                out.append(path)
    return out
