"""Discovering routed layers: the small protocol that balancing and MoE-CAP tools use.

A *routed path* is one router (or fixed gate) feeding one expert bank. An :class:`MoE`
layer has one; SPiCE's geometric MoE has two (scalars, vectors); a diffusion time
mixture has one whose experts are whole networks. Any module exposes its paths by
defining ``routed_paths(self) -> list[RoutedPath]``; :func:`routed_paths` walks a model
and collects them, so :class:`~sci_moe.moe.BiasBalancer`,
:class:`~sci_moe.moe.cap.CapRecorder` and
:meth:`ModelSpec.from_module <sci_moe.moe.cap.ModelSpec.from_module>` see every routed
layer, not only :class:`MoE` instances.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

__all__ = ["RoutedLayer", "RoutedPath", "routed_paths"]


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


class RoutedLayer:
    """Mixin documenting the protocol: define :meth:`routed_paths` on a routed module.

    Inheriting from it is optional (tools look for the method); it only gives the
    method a docstring and a default that raises.
    """

    def routed_paths(self) -> list[RoutedPath]:
        """The :class:`RoutedPath` objects of this layer, in a fixed order."""
        raise NotImplementedError


def routed_paths(model: nn.Module) -> list[RoutedPath]:
    """Every routed path of ``model``, in ``model.modules()`` order.

    A module contributes the paths returned by its ``routed_paths()`` method; its
    submodules are still visited (a layer nested inside another routed layer is found
    too), but a path is reported once even if reachable from several owners.

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
        fn = getattr(type(m), "routed_paths", None)
        if fn is None or fn is RoutedLayer.routed_paths:
            continue
        for path in m.routed_paths():
            key = (id(path.router), id(path.experts))
            if key not in seen:
                seen.add(key)
                out.append(path)
    return out
