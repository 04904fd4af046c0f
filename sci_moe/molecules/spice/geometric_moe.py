"""Geometric Mixture-of-Experts: separate routing of invariant scalars and equivariant vectors.

SPiCE (Zhu et al., NeurIPS 2025; public code DannieSYD/SPiCE ``models/spice.py``) routes
every conformer-atom twice:

* **scalar path** — a router on the invariant features ``h`` picks ``k`` of ``E`` MLP
  experts: ``h' = h + sum_{e in S^s} pi^s_e f_e(LN(h))``;
* **vector path** — a router on rotation-invariant *Gram* features of the vectors picks
  ``k`` of ``E`` vector experts: ``V' = V + sum_{e in S^v} pi^v_e g_e(h, V)``.

Each path is a :class:`sci_moe.moe.RoutedModule` (:class:`ScalarRoutedLayer`,
:class:`VectorRoutedLayer`) with a :class:`sci_moe.moe.Router` and an expert bank run
through :func:`sci_moe.moe.dispatch` (sort by expert, grouped GEMM, deterministic
combine), so :func:`sci_moe.testing.assert_routed_module` checks both against the naive
loop.

Symmetry. The Gram matrix ``G = (V W)^T (V W)`` of the projected channels is unchanged
by ``V -> Q V`` for every ``Q`` in O(3), so the vector routing is invariant. A vector
expert is ``g_e(h, V) = (V M_e^T) \\odot u_e(h)``: a channel mixing that acts linearly on
the vectors, gated per channel by an invariant MLP of ``h`` — equivariant. The routing
weights are invariant scalars, so the weighted sum stays equivariant.

Differences from the public code (see ``papers/molecules.md`` §2): the Gram matrix is
taken of ``r`` learned channel projections (``r (r+1) / 2`` features instead of ``F^2``),
routing noise is Gaussian logit noise in training mode only (the public code applies
Gumbel noise at evaluation too), the experts run sparsely (the public code evaluates all
``E`` and masks), and upcycling copies expert 0 *in place* (:meth:`GeometricMoE.upcycle_`)
so the optimiser keeps seeing the same parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ...moe import (
    DispatchPlan,
    ExpertBank,
    MLPExperts,
    RoutedModule,
    RoutedPath,
    Router,
    RouterConfig,
    Routing,
    auxiliary_losses,
    copy_expert,
)

__all__ = [
    "GeometricMoE",
    "GeometricMoEConfig",
    "GeometricMoEInfo",
    "GramFeatures",
    "ScalarRoutedLayer",
    "VectorExperts",
    "VectorRoutedLayer",
    "dense_routing",
]


@dataclass
class GeometricMoEConfig:
    """Options of a :class:`GeometricMoE` layer.

    Parameters
    ----------
    hidden : int
        Channels ``F`` of the scalars and of the vectors.
    num_experts : int
        Experts ``E`` per path (SPiCE: 8).
    top_k : int
        Experts per token and path (SPiCE: 2).
    expert_hidden : int, optional
        Hidden size of the scalar experts and of the vector experts' gate MLP
        (default ``2 * hidden``).
    gram_rank : int
        Channels ``r`` projected before the Gram matrix; the vector router sees
        ``r (r + 1) / 2`` invariant features.
    noise_std : float
        Gaussian noise on the router logits, training mode only.
    load_balance_coef, z_loss_coef : float
        Weights of the Switch load-balance loss and the router z-loss
        (:func:`sci_moe.moe.load_balancing_loss`, :func:`sci_moe.moe.router_z_loss`),
        summed over both paths.
    selection_bias : bool
        Give both routers a selection-only bias for auxiliary-loss-free balancing
        (:class:`sci_moe.moe.BiasBalancer` finds them through ``routed_paths()``).
    dense : bool
        Start in dense mode: every token uses expert 0 with weight 1 (the "dense
        expert" trained before upcycling, or a model without MoE when
        ``num_experts=1``). :meth:`GeometricMoE.upcycle_` leaves dense mode.
    """

    hidden: int
    num_experts: int = 8
    top_k: int = 2
    expert_hidden: int | None = None
    gram_rank: int = 8
    noise_std: float = 0.0
    load_balance_coef: float = 0.01
    z_loss_coef: float = 1e-3
    selection_bias: bool = False
    dense: bool = False

    def __post_init__(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden}")
        if self.num_experts < 1:
            raise ValueError(f"num_experts must be >= 1, got {self.num_experts}")
        if not 1 <= self.top_k <= self.num_experts:
            raise ValueError(
                f"top_k={self.top_k} must be between 1 and num_experts={self.num_experts}"
            )
        if self.expert_hidden is None:
            self.expert_hidden = 2 * self.hidden
        if self.expert_hidden < 1:
            raise ValueError(f"expert_hidden must be >= 1, got {self.expert_hidden}")
        if self.gram_rank < 1:
            raise ValueError(f"gram_rank must be >= 1, got {self.gram_rank}")
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {self.noise_std}")
        if min(self.load_balance_coef, self.z_loss_coef) < 0:
            raise ValueError("load_balance_coef and z_loss_coef must be >= 0")

    def router_config(self, d_model: int) -> RouterConfig:
        """The :class:`~sci_moe.moe.RouterConfig` of a path whose router sees ``d_model``."""
        return RouterConfig(
            d_model=d_model,
            num_experts=self.num_experts,
            top_k=self.top_k,
            noise_std=self.noise_std,
            selection_bias=self.selection_bias,
        )


def dense_routing(num_tokens: int, num_experts: int, like: torch.Tensor) -> Routing:
    """Every token to expert 0 with weight 1 (dense mode before upcycling).

    Parameters
    ----------
    num_tokens, num_experts : int
    like : Tensor
        Gives device and dtype.

    Returns
    -------
    Routing
        :meth:`Routing.one_expert <sci_moe.moe.Routing.one_expert>` on expert 0:
        ``indices`` zeros of shape ``(T, 1)``, ``weights`` ones, ``probs`` one-hot on
        expert 0, marked :attr:`~sci_moe.moe.Routing.single_expert`, so
        :func:`sci_moe.moe.dispatch` applies expert 0 to all tokens directly.
    """
    return Routing.one_expert(num_tokens, num_experts, 0, dtype=like.dtype, device=like.device)


class GramFeatures(nn.Module):
    """Rotation- and reflection-invariant features of vector channels.

    .. math:: G = (V W)^\\top (V W) \\in \\mathbb R^{r\\times r},\\qquad
       \\mathrm{out} = \\mathrm{LN}(\\mathrm{triu}(G))

    ``V`` of shape ``(P, 3, F)``, ``W`` of shape ``(F, r)``. ``(Q V W)^T (Q V W) = G``
    for orthogonal ``Q``.

    Parameters
    ----------
    hidden : int
        Vector channels ``F``.
    rank : int
        Projected channels ``r``.
    """

    def __init__(self, hidden: int, rank: int) -> None:
        super().__init__()
        self.rank = rank
        self.proj = nn.Linear(hidden, rank, bias=False)
        rows, cols = torch.triu_indices(rank, rank)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        self.norm = nn.LayerNorm(self.dim)

    @property
    def dim(self) -> int:
        """Output size ``r (r + 1) / 2``."""
        return self.rank * (self.rank + 1) // 2

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        """``v`` of shape ``(P, 3, F)`` -> invariant features ``(P, r (r + 1) / 2)``."""
        q = self.proj(v)  # (P, 3, r)
        # the upper triangle G_ab = sum_x q_xa q_xb directly (no (P, r, r) batch of 3-deep bmm);
        # index_select rather than q[:, :, rows]: the same values, faster forward and backward
        return self.norm((q.index_select(2, self.rows) * q.index_select(2, self.cols)).sum(1))


class VectorExperts(ExpertBank):
    """``E`` equivariant vector experts on tokens ``x = [h, vec(V)]``.

    .. math:: g_e(h, V) = (V M_e^\\top) \\odot \\big(W^{(2)}_e\\,\\mathrm{SiLU}(W^{(1)}_e h)\\big)

    ``M_e`` of shape ``(F, F)`` mixes vector channels (linear on vectors, no bias); the
    gate is an invariant MLP of the scalars. A token is the concatenation of ``h``
    (``F`` values) and ``V`` of shape ``(3, F)`` flattened row-major (``3 F`` values);
    the output is ``(3, F)`` flattened the same way.

    Parameters
    ----------
    num_experts : int
    hidden : int
        Channels ``F``.
    gate_hidden : int
        Hidden size of the gate MLP.
    """

    def __init__(self, num_experts: int, hidden: int, gate_hidden: int) -> None:
        super().__init__()
        self.num_experts, self.hidden = num_experts, hidden
        self.d_in, self.d_out = 4 * hidden, 3 * hidden
        self.gate_up = nn.Parameter(torch.empty(num_experts, gate_hidden, hidden))
        self.gate_down = nn.Parameter(torch.empty(num_experts, hidden, gate_hidden))
        self.gate_bias = nn.Parameter(torch.ones(num_experts, hidden))
        self.mix = nn.Parameter(torch.empty(num_experts, hidden, hidden))
        for w, fan in ((self.gate_up, hidden), (self.gate_down, gate_hidden)):
            nn.init.uniform_(w, -1 / math.sqrt(fan), 1 / math.sqrt(fan))
        with torch.no_grad():  # start near the identity mixing
            eye = torch.eye(hidden).expand(num_experts, -1, -1)
            self.mix.copy_(eye + 0.1 * torch.randn(num_experts, hidden, hidden) / hidden**0.5)

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        F = self.hidden
        # split, not two slices: its backward concatenates the two gradients instead of
        # filling a zero (N, 4 F) gradient per slice
        h, v = x.split([F, 3 * F], dim=1)
        return h, v.reshape(-1, 3, F)

    def forward_sorted(self, x: torch.Tensor, plan: DispatchPlan) -> torch.Tensor:
        h, v = self._split(x)
        act = torch.nn.functional.silu
        up = self.grouped_linear(h, self.gate_up, plan)
        gate = self.grouped_linear(act(up), self.gate_down, plan, self.gate_bias)
        # Each token contributes 3 consecutive rows (x, y, z) of F channels.
        mixed = self.grouped_linear(
            v.reshape(-1, self.hidden), self.mix, plan, rows_per_token=3
        ).reshape(-1, 3, self.hidden)
        return (mixed * gate.unsqueeze(1)).reshape(-1, self.d_out)

    def forward_expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        h, v = self._split(x)
        F = torch.nn.functional
        gate = F.linear(F.silu(F.linear(h, self.gate_up[e])), self.gate_down[e], self.gate_bias[e])
        mixed = F.linear(v, self.mix[e])
        return (mixed * gate.unsqueeze(1)).reshape(-1, self.d_out)

    def copy_expert_(self, src: int = 0) -> None:
        """Overwrite every expert with expert ``src``, in place (see ``copy_expert``)."""
        copy_expert(self, src)


class ScalarRoutedLayer(RoutedModule):
    """SPiCE's scalar path: ``sum_{e in S^s} pi^s_e f_e(x)`` of the normalised scalars ``x``.

    A :class:`~sci_moe.moe.RoutedModule`: a :class:`~sci_moe.moe.Router` on ``x`` picks
    ``k`` of ``E`` two-layer SiLU MLP experts (:class:`~sci_moe.moe.MLPExperts`). The
    residual, the layer norm and the auxiliary losses belong to :class:`GeometricMoE`,
    which also passes the routing in dense mode (every token to expert 0).

    Parameters
    ----------
    config : GeometricMoEConfig

    Attributes
    ----------
    router : sci_moe.moe.Router
        ``weight`` of shape ``(E, F)``.
    experts : sci_moe.moe.MLPExperts
        ``E`` experts ``F -> expert_hidden -> F``.
    """

    def __init__(self, config: GeometricMoEConfig) -> None:
        super().__init__()
        c = config
        self.d_model = c.hidden
        self.router = Router(c.router_config(c.hidden))
        self.experts = MLPExperts(c.num_experts, c.hidden, c.expert_hidden, "silu", bias=True)


class VectorRoutedLayer(RoutedModule):
    """SPiCE's vector path: ``sum_{e in S^v} pi^v_e g_e(h, V)`` on tokens ``x = [h, vec(V)]``.

    A :class:`~sci_moe.moe.RoutedModule` whose :class:`~sci_moe.moe.Router` reads the
    invariant :class:`GramFeatures` of the vectors (not the token itself) and whose experts
    are :class:`VectorExperts`. A token is ``h`` (``F`` values) followed by ``V`` of shape
    ``(3, F)`` flattened row-major; the output is ``(3, F)`` flattened the same way.

    Parameters
    ----------
    config : GeometricMoEConfig

    Attributes
    ----------
    gram : GramFeatures
        ``r (r + 1) / 2`` invariant features of the vectors.
    router : sci_moe.moe.Router
        ``weight`` of shape ``(E, r (r + 1) / 2)``.
    experts : VectorExperts
    """

    def __init__(self, config: GeometricMoEConfig) -> None:
        super().__init__()
        c = config
        self.hidden = c.hidden
        self.d_model = 4 * c.hidden
        self.gram = GramFeatures(c.hidden, c.gram_rank)
        self.router = Router(c.router_config(self.gram.dim))
        self.experts = VectorExperts(c.num_experts, c.hidden, c.expert_hidden)

    def route_vectors(self, v: torch.Tensor) -> Routing:
        """Routing of the vectors ``v`` of shape ``(P, 3, F)`` (invariant under O(3))."""
        return self.router(self.gram(v))

    def route(self, x: torch.Tensor) -> Routing:
        """Routing of the ``(P, 4 F)`` tokens ``[h, vec(V)]``: :meth:`route_vectors` of ``V``."""
        return self.route_vectors(x[:, self.hidden :].reshape(-1, 3, self.hidden))


@dataclass
class GeometricMoEInfo:
    """Routing and auxiliary losses of one :class:`GeometricMoE` call.

    Attributes
    ----------
    scalar_routing, vector_routing : Routing
    losses : dict of str to Tensor
        Unweighted ``scalar/load_balance``, ``scalar/z_loss``, ``vector/load_balance``,
        ``vector/z_loss`` (empty in dense mode).
    aux_loss : Tensor, scalar
        ``load_balance_coef * (L_bal^s + L_bal^v) + z_loss_coef * (L_z^s + L_z^v)``.
    """

    scalar_routing: Routing
    vector_routing: Routing
    losses: dict
    aux_loss: torch.Tensor


class GeometricMoE(nn.Module):
    """SPiCE's geometric MoE: scalar and vector experts routed independently.

    .. math::

        h' = h + \\sum_{e\\in S^s}\\pi^s_e\\, f_e(\\mathrm{LN}(h)), \\qquad
        V' = V + \\sum_{e\\in S^v}\\pi^v_e\\, g_e(\\mathrm{LN}(h), V)

    with ``S^s, pi^s`` from a router on ``LN(h)`` and ``S^v, pi^v`` from a router on
    :class:`GramFeatures` of ``V``; ``f_e`` two-layer SiLU MLPs
    (:class:`~sci_moe.moe.MLPExperts`) and ``g_e`` :class:`VectorExperts`. The two routed
    paths are :class:`~sci_moe.moe.RoutedModule` layers, :attr:`scalar`
    (:class:`ScalarRoutedLayer`) and :attr:`vector` (:class:`VectorRoutedLayer`); this
    layer adds the shared layer norm, the residuals, dense mode and the auxiliary losses.

    Parameters
    ----------
    config : GeometricMoEConfig
        Built from ``**kwargs`` when omitted.

    Attributes
    ----------
    norm : nn.LayerNorm
        ``LN`` of the scalars, read by both paths.
    scalar : ScalarRoutedLayer
    vector : VectorRoutedLayer

    Examples
    --------
    >>> moe = GeometricMoE(hidden=16, num_experts=4, top_k=2)
    >>> h, v, info = moe(torch.randn(10, 16), torch.randn(10, 3, 16))
    >>> h.shape, v.shape, info.scalar_routing.indices.shape
    (torch.Size([10, 16]), torch.Size([10, 3, 16]), torch.Size([10, 2]))
    """

    def __init__(self, config: GeometricMoEConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = GeometricMoEConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a GeometricMoEConfig or keyword arguments, not both")
        c = self.config = config
        self.norm = nn.LayerNorm(c.hidden)
        self.scalar = ScalarRoutedLayer(c)
        self.vector = VectorRoutedLayer(c)
        self.register_buffer("dense", torch.tensor(bool(c.dense)))

    @property
    def is_dense(self) -> bool:
        """Whether every token goes to expert 0 (before :meth:`upcycle_`)."""
        return bool(self.dense)

    @torch.no_grad()
    def upcycle_(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Copy expert 0 into every expert of both paths, in place, and leave dense mode.

        The parameters stay the same objects, so an existing optimiser keeps training
        all of them (the public SPiCE code replaces them inside ``forward``, which hides
        the copies from the optimiser). With ``optimizer``, its per-parameter moments
        (AdamW's ``exp_avg``/``exp_avg_sq``) are copied the same way
        (:func:`sci_moe.moe.copy_expert`).
        """
        copy_expert(self.scalar.experts, 0, optimizer=optimizer)
        copy_expert(self.vector.experts, 0, optimizer=optimizer)
        self.dense.fill_(False)

    def routed_paths(self) -> list[RoutedPath]:
        """The ``"scalar"`` and ``"vector"`` paths (:func:`sci_moe.moe.routed_paths`).

        So :class:`~sci_moe.moe.BiasBalancer` and MoE-CAP's recorder see both routers,
        labelled ``GeometricMoE/scalar`` and ``GeometricMoE/vector``.
        """
        c = self.config
        return [
            RoutedPath(
                self,
                layer.router,
                layer.experts,
                c.num_experts,
                c.top_k,
                d_model=layer.d_model,
                name=name,
            )
            for name, layer in (("scalar", self.scalar), ("vector", self.vector))
        ]

    def route(self, h: torch.Tensor, v: torch.Tensor) -> tuple[Routing, Routing, torch.Tensor]:
        """Routings of both paths and the normalised scalars ``LN(h)``."""
        hn = self.norm(h)
        if self.is_dense:
            rs = dense_routing(h.shape[0], self.config.num_experts, hn)
            return rs, rs, hn
        return self.scalar.route(hn), self.vector.route_vectors(v), hn

    def forward(
        self, h: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, GeometricMoEInfo]:
        """Apply both routed paths with residual connections.

        Parameters
        ----------
        h : Tensor, shape (P, F)
        v : Tensor, shape (P, 3, F)

        Returns
        -------
        h : Tensor, shape (P, F)
        v : Tensor, shape (P, 3, F)
        info : GeometricMoEInfo
        """
        F = self.config.hidden
        if h.dim() != 2 or h.shape[1] != F or v.shape != (h.shape[0], 3, F):
            raise ValueError(
                f"expected h of shape (P, {F}) and v of shape (P, 3, {F}); got "
                f"{tuple(h.shape)} and {tuple(v.shape)}"
            )
        rs, rv, hn = self.route(h, v)
        xv = torch.cat([hn, v.reshape(v.shape[0], 3 * F)], dim=1)
        # dense mode's routing is marked single-expert: the dispatch applies expert 0
        # directly (no sort, gather or weighted combine)
        dh = self.scalar(hn, routing=rs)
        dv = self.vector(xv, routing=rv).reshape(-1, 3, F)
        losses: dict = {}
        aux = h.new_zeros(())
        if not self.is_dense:
            c = self.config
            for name, r in (("scalar", rs), ("vector", rv)):
                ls, a = auxiliary_losses(r, c.load_balance_coef, c.z_loss_coef)
                losses.update({f"{name}/{k}": val for k, val in ls.items()})
                aux = aux + a
        return h + dh, v + dv, GeometricMoEInfo(rs, rv, losses, aux)
