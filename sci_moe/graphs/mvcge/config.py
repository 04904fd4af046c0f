"""Options of :class:`~sci_moe.graphs.mvcge.MvCGE`: :class:`MvCGEConfig` and its checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..pooling import POOLINGS

__all__ = ["MvCGEConfig"]

_TOKENS = ("view", "node")
_FUSIONS = ("attention", "mean", "concat")
_ROUTER_INPUTS = ("graph", "propagated")
_LE_SOURCES = ("probs", "weights")


@dataclass
class MvCGEConfig:
    """Options of :class:`MvCGE`.

    Parameters
    ----------
    in_dim, num_classes : int
    hidden_dim : int
    num_layers : int
        Graph-expert layers (each: propagate, route, experts).
    num_experts, top_k : int
        ``M`` experts per layer, ``k`` selected per token.
    token : {"view", "node"}
        Route every node of every view (``"node"``, the default) or one pooled token per
        view (``"view"``). With shared node features the pooled propagated features of
        the views are nearly equal (a normalised adjacency preserves the feature mean), so
        view tokens send every view to the same experts.
    router_input : {"graph", "propagated"}
        What the router sees of a token: ``"graph"`` (default) the propagated row
        ``(Â_v H_v)_i``, its contrast with the node's own row ``(Â_v H_v)_i - H_{v,i}``
        and ``log(1 + deg_v(i))``, i.e. how the node sits in view ``v``; ``"propagated"``
        the propagated row only (content without the view's structure: views that carry
        the same content are routed alike).
    pool : {"mean", "sum", "max"}
        Readout of the propagated features for ``token="view"``.
    shared_experts : bool
        One expert pool (and router) per layer shared by all views (MvCGE). ``False``
        gives every view its own router and bank (the unshared ablation; needs
        ``num_views``).
    num_views : int, optional
    fusion : {"attention", "mean", "concat"}
        Semantic attention over the views (``Z = sum_v beta_v H_v``), their mean, or their
        concatenation (``Z = [H_1, ..., H_V]``, shape ``(N, V hidden_dim)``; needs
        ``num_views``): the sums put every view's embedding in the same coordinates, so
        the classifier cannot tell which view said what; the concatenation keeps it.
    dropout : float
        On every layer's input (training only).
    activation : str
    router_noise : float
        Std of the Gaussian logit noise ``epsilon`` (training only).
    le_weight, gd_weight : float
        ``alpha`` and ``beta`` of the objective.
    le_source : {"probs", "weights"}
        Importance of ``L_le``: the router's full softmax (``"probs"``, default: the loss
        can move probability onto unused experts) or the renormalised top-``k`` weights
        (``"weights"``: zero gradient for every unselected expert, so a collapsed
        routing stays collapsed).
    mmd_bandwidths : sequence of float, optional
        Squared-distance bandwidths of the MMD kernels (default: median heuristic).
    mmd_max_nodes : int
        Nodes sampled (the same for every view) for ``L_gd`` per step, drawn from torch's
        global CPU generator on every device (a GPU run draws the CPU run's nodes).
    """

    in_dim: int
    num_classes: int
    hidden_dim: int = 64
    num_layers: int = 2
    num_experts: int = 4
    top_k: int = 2
    token: str = "node"
    router_input: str = "graph"
    pool: str = "mean"
    shared_experts: bool = True
    num_views: int | None = None
    fusion: str = "attention"
    dropout: float = 0.5
    activation: str = "relu"
    router_noise: float = 0.0
    le_weight: float = 0.01
    gd_weight: float = 0.1
    le_source: str = "probs"
    mmd_bandwidths: Sequence[float] | None = None
    mmd_max_nodes: int = 128

    def __post_init__(self) -> None:
        for name in ("in_dim", "num_classes", "hidden_dim", "num_layers", "num_experts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.top_k <= self.num_experts:
            raise ValueError(f"top_k must be in [1, num_experts={self.num_experts}]")
        if self.token not in _TOKENS:
            raise ValueError(f"token must be one of {_TOKENS}, got {self.token!r}")
        if self.router_input not in _ROUTER_INPUTS:
            raise ValueError(
                f"router_input must be one of {_ROUTER_INPUTS}, got {self.router_input!r}"
            )
        if self.le_source not in _LE_SOURCES:
            raise ValueError(f"le_source must be one of {_LE_SOURCES}, got {self.le_source!r}")
        if self.pool not in POOLINGS:
            raise ValueError(f"pool must be one of {POOLINGS}, got {self.pool!r}")
        if self.fusion not in _FUSIONS:
            raise ValueError(f"fusion must be one of {_FUSIONS}, got {self.fusion!r}")
        if not self.shared_experts and (self.num_views is None or self.num_views < 1):
            raise ValueError("shared_experts=False needs num_views (one expert pool per view)")
        if self.fusion == "concat" and (self.num_views is None or self.num_views < 1):
            raise ValueError("fusion='concat' needs num_views (the classifier reads V embeddings)")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.router_noise < 0 or self.le_weight < 0 or self.gd_weight < 0:
            raise ValueError("router_noise, le_weight and gd_weight must be >= 0")
        if self.mmd_max_nodes < 2:
            raise ValueError(f"mmd_max_nodes must be >= 2, got {self.mmd_max_nodes}")
