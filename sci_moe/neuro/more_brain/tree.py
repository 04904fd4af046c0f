"""Hierarchical (tree) expert-choice routing.

:class:`TreeExpertChoice` is a tree of expert banks (e.g. ``2 -> 4 -> 8 -> 16`` experts)
in which every expert *chooses* its tokens (expert-choice routing with capacity, Zhou et
al. 2022) and a child expert may choose only among the rows its parent produced, so the
outputs of a level are re-routed to the children of each expert (MoRE-Brain, Wei et al.,
NeurIPS 2025). Every level is a :class:`TreeLevelLayer`, a
:class:`~sci_moe.moe.RoutedModule` routed by the core :class:`~sci_moe.moe.Router` in
tree mode (``mode="tree"``: each child chooses among its parent's rows, a gather
routing) and run through the core's one dispatch path (:func:`~sci_moe.moe.dispatch`)
and a core expert bank. :class:`TreeLevel` holds what one level selected;
:func:`tree_capacities` the rows each expert chooses. The per-level usage loss is
:func:`tree_level_usage_loss`, the per-level summary :func:`tree_level_diagnostics`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from sci_moe.moe import (
    ExpertBank,
    MLPExperts,
    MoEInfo,
    RoutedModule,
    Router,
    RouterConfig,
    Routing,
    dispatch,
    usage_mse_loss,
)

__all__ = [
    "TreeExpertChoice",
    "TreeLevel",
    "TreeLevelLayer",
    "tree_capacities",
    "tree_level_diagnostics",
    "tree_level_usage_loss",
]


def tree_capacities(num_tokens: int, experts: Sequence[int], capacity_factor: float) -> list[int]:
    """Rows each expert chooses at every level of an expert-choice tree.

    .. math:: k_0 = \\lfloor c_f\\, T / E_0 \\rfloor, \\qquad
              k_l = \\lfloor c_f\\, k_{l-1} / b_l \\rfloor, \\quad b_l = E_l / E_{l-1}

    (MoRE-Brain: ``k = floor(v / e_l * c_f)`` with ``v`` the candidates of an expert).

    Parameters
    ----------
    num_tokens : int
        Tokens per group ``T`` (e.g. voxels per sample).
    experts : sequence of int
        Experts per level; each level's count must be a multiple of the previous one.
    capacity_factor : float
        ``c_f > 0``; ``c_f = 1`` partitions the candidates when the experts agree.

    Returns
    -------
    list of int
        ``k_l`` per level.

    Raises
    ------
    ValueError
        If a level would leave its experts with no row to choose (``k_l < 1``).
    """
    experts = [int(e) for e in experts]
    if not experts or any(e < 1 for e in experts):
        raise ValueError(f"experts per level must be >= 1, got {experts}")
    for a, b in itertools.pairwise(experts):
        if b % a:
            raise ValueError(
                f"each level's experts must be a multiple of the previous level's; got {experts}"
            )
    if capacity_factor <= 0:
        raise ValueError(f"capacity_factor must be > 0, got {capacity_factor}")
    caps, prev, parents = [], int(num_tokens), 1
    for level, e in enumerate(experts):
        branch = e // parents
        k = min(prev, math.floor(capacity_factor * prev / branch))
        if k < 1:
            raise ValueError(
                f"level {level}: {branch} children share {prev} candidate rows with "
                f"capacity_factor={capacity_factor}, leaving each expert 0 rows; use more "
                "tokens (voxels), fewer experts or a larger capacity_factor"
            )
        caps.append(k)
        prev, parents = k, e
    return caps


@dataclass
class TreeLevel:
    """The rows one level of a :class:`TreeExpertChoice` selected and computed.

    Rows are ordered ``(group, expert, slot)``: ``R = G * E * k``.

    Attributes
    ----------
    routing : Routing
        One expert per row (``indices`` shape ``(R, 1)``), weight = the row's score.
    source : Tensor, shape (R,), int64
        Row of the previous level's output (level 0: flat token ``g * T + t``) each row
        was chosen from.
    token : Tensor, shape (R,), int64
        Original token (within its group) each row descends from.
    candidate_probs : Tensor, shape (G, P, k_prev, b)
        Scores of every candidate row over its parent's ``b`` children (softmax).
    output : Tensor, shape (R, d)
        The level's output rows (``x + w * expert(x)`` with the residual, else
        ``w * expert(x)``).
    num_groups, num_experts, capacity, branching : int
    """

    routing: Routing
    source: torch.Tensor
    token: torch.Tensor
    candidate_probs: torch.Tensor
    output: torch.Tensor
    num_groups: int
    num_experts: int
    capacity: int
    branching: int

    @property
    def expert(self) -> torch.Tensor:
        """Expert of each row, shape ``(R,)``."""
        return self.routing.indices[:, 0]

    @property
    def weights(self) -> torch.Tensor:
        """Score of each row, shape ``(R,)``."""
        return self.routing.weights[:, 0]

    def per_expert(self, rows: torch.Tensor) -> torch.Tensor:
        """View row values ``(R, ...)`` as ``(G, E, k, ...)``."""
        return rows.reshape(self.num_groups, self.num_experts, self.capacity, *rows.shape[1:])


class TreeLevelLayer(RoutedModule):
    """One level of an expert-choice tree: ``E`` children choose among their parents' rows.

    MoRE-Brain's routed layer (Wei et al., NeurIPS 2025). Its router is the core
    :class:`~sci_moe.moe.Router` in tree mode: for candidate row ``x`` of parent ``p``
    the ``b = E / P`` children of ``p`` score it by a softmax over the siblings, each
    child keeps its top ``k = min(v, floor(c_f v / b))`` of the ``v`` rows of its parent
    (per group), and the routing is a *gather* routing (:attr:`Routing.source
    <sci_moe.moe.Routing.source>`: routed row ``r`` reads candidate row ``source[r]``).
    Child ``c`` outputs, for each chosen row, ``x + P_{x,c} f_c(x)`` (residual: the
    always-on ``shared`` term is the identity) or ``P_{x,c} f_c(x)``. The level
    overrides :meth:`forward`: a gather routing gives one output row per *routed* row,
    not per input row, so the chosen rows are gathered once and the residual is added
    to them (:meth:`RoutedModule.forward <sci_moe.moe.RoutedModule.forward>` keeps the
    input's rows).

    Parameters
    ----------
    router : Router
        ``mode="tree"``, ``num_experts = E``.
    experts : ExpertBank
        ``E`` experts ``d -> d``.
    parents : int
        ``P``, the experts of the level above (1 for the root level).
    residual : bool
        Add the chosen row to its child's weighted output.

    Examples
    --------
    >>> from sci_moe.moe import MLPExperts, Router
    >>> level = TreeLevelLayer(Router(d_model=4, num_experts=4, mode="tree", capacity_factor=1.0),
    ...                        MLPExperts(4, 4, 8), parents=2)
    >>> y, info = level(torch.randn(3 * 2 * 6, 4), groups=3, return_routing=True)
    >>> y.shape, info.routing.source.shape  # 3 groups x 4 children x 3 rows
    (torch.Size([36, 4]), torch.Size([36]))
    """

    def __init__(
        self, router: Router, experts: ExpertBank, parents: int = 1, residual: bool = True
    ) -> None:
        super().__init__()
        if router.config.mode != "tree":
            raise ValueError(
                f"a tree level needs a Router with mode='tree', got {router.config.mode!r}"
            )
        E, d = router.num_experts, router.config.d_model
        if experts.num_experts != E or experts.d_in != d or experts.d_out != d:
            raise ValueError(
                f"the bank must map {d} -> {d} with {E} experts, got "
                f"{experts.d_in} -> {experts.d_out} with {experts.num_experts}"
            )
        if parents < 1 or E % parents:
            raise ValueError(f"parents={parents} must divide the level's {E} experts")
        self.d_model, self.parents = d, int(parents)
        self.router, self.experts = router, experts
        self.shared = nn.Identity() if residual else None

    @property
    def residual(self) -> bool:
        """Whether the chosen row is added to its child's output."""
        return self.shared is not None

    def extra_repr(self) -> str:
        return f"parents={self.parents}, residual={self.residual}"

    def route(self, x: torch.Tensor, *, groups: int, scores: torch.Tensor | None = None) -> Routing:
        """The gather routing of the candidate rows ``x``.

        ``x`` has shape ``(G P v, d)``, rows ordered ``(group, parent, row)``; ``scores``
        are the candidates' sibling scores of :meth:`Router.tree_scores
        <sci_moe.moe.Router.tree_scores>` when computed beforehand.
        """
        return self.router(x, parents=self.parents, groups=groups, scores=scores)

    def forward(
        self,
        x: torch.Tensor,
        routing: Routing | None = None,
        *,
        return_routing: bool = False,
        groups: int | None = None,
        scores: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, MoEInfo]:
        """Run the level: gather the chosen rows, dispatch them, add the residual.

        Parameters
        ----------
        x : Tensor, shape (G * P * v, d)
            Candidate rows ordered ``(group, parent, row)``.
        routing : Routing, optional
            A gather routing of :meth:`route` (then no ``groups``/``scores``).
        return_routing : bool
            Also return the :class:`~sci_moe.moe.MoEInfo` (no auxiliary losses).
        groups : int
            ``G`` (needed unless ``routing`` is given).
        scores : Tensor, shape (G, P, v, E / P), optional
            Sibling scores computed beforehand (see :meth:`route`).

        Returns
        -------
        y : Tensor, shape (G * E * k, d)
            One row per routed row, ordered ``(group, expert, slot)``.
        info : MoEInfo
            Only with ``return_routing=True``.
        """
        if x.dim() != 2 or x.shape[1] != self.d_model:
            raise ValueError(
                f"{type(self).__name__} expects candidate rows of shape (rows, {self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        if routing is None:
            if groups is None:
                raise ValueError("give groups= (or a routing computed by route())")
            routing = self.route(x, groups=groups, scores=scores)
        elif groups is not None or scores is not None:
            raise ValueError(
                "groups=/scores= given with a precomputed routing; pass one or the other"
            )
        # gather once, then dispatch the gathered rows (the routing without its source)
        inp = x if routing.source is None else x[routing.source]
        rows = Routing(
            routing.indices, routing.weights, routing.logits, routing.probs, routing.num_experts
        )
        y = dispatch(inp, rows, self.experts)
        if self.shared is not None:
            y = self.shared(inp) + y
        if not return_routing:
            return y
        return y, MoEInfo(
            routing, {}, x.new_zeros((), dtype=torch.promote_types(x.dtype, torch.float32))
        )


class TreeExpertChoice(nn.Module):
    """A tree of expert-choice MoE levels; each expert's outputs go to its children.

    Level 0 has ``E_0`` experts choosing among the ``T`` tokens of each group; level
    ``l`` has ``E_l = b_l E_{l-1}`` experts, the ``b_l`` children of parent ``p``
    choosing among the ``k_{l-1}`` rows that ``p`` produced. For candidate row ``x``
    of parent ``p`` the child scores are

    .. math:: P_{x,c} = \\mathrm{softmax}_{c \\in \\mathrm{ch}(p)}\\big(W^{(l)}_c x\\big),
              \\qquad S_c, I_c = \\mathrm{TopK}_{x \\in \\mathrm{rows}(p)}(P_{x,c},\\, k_l)

    and child ``c`` outputs, for each chosen row, ``x + P_{x,c} f_c(x)`` (residual) or
    ``P_{x,c} f_c(x)``, with ``f_c`` expert ``c`` of the level's bank. Selection is per
    group (a group is e.g. one sample's voxels), so capacity ``k_l`` is respected in
    every group (:func:`tree_capacities`). Every level is a :class:`TreeLevelLayer`
    (the core :class:`~sci_moe.moe.Router` in tree mode and a bank).

    Parameters
    ----------
    d_model : int
        Row feature size ``d`` (input and output of every expert).
    experts : sequence of int
        Experts per level, e.g. ``(2, 4, 8, 16)``.
    capacity_factor : float
        ``c_f`` (MoRE-Brain uses 1). The capacities follow from the tokens per group
        of each call (:meth:`capacities`), so groups of any size ``T`` work.
    d_hidden : int, optional
        Hidden size of the default :class:`~sci_moe.moe.MLPExperts` banks (default ``2 d``).
    banks : sequence of ExpertBank, optional
        One bank per level (``d -> d``, ``E_l`` experts) instead of the MLP default.
    residual : bool
        Add the input row to each expert's weighted output.
    noise_std : float
        Gaussian noise on the router logits in training mode (MoRE-Brain code: 1e-3).

    Attributes
    ----------
    levels : ModuleList of TreeLevelLayer
        ``levels[l].router`` (``mode="tree"``, ``weight`` of shape ``(E_l, d)``) and
        ``levels[l].experts`` (the bank) of every level, root first.
    """

    def __init__(
        self,
        d_model: int,
        experts: Sequence[int],
        capacity_factor: float = 1.0,
        d_hidden: int | None = None,
        banks: Sequence[ExpertBank] | None = None,
        residual: bool = True,
        noise_std: float = 0.0,
    ) -> None:
        super().__init__()
        self.experts = [int(e) for e in experts]
        tree_capacities(max(self.experts), self.experts, 1.0)  # validates the level sizes
        if capacity_factor <= 0:
            raise ValueError(f"capacity_factor must be > 0, got {capacity_factor}")
        self.capacity_factor = float(capacity_factor)
        self.d_model, self.residual = int(d_model), residual
        routers = [
            Router(
                RouterConfig(
                    d_model=d_model,
                    num_experts=e,
                    mode="tree",
                    capacity_factor=capacity_factor,
                    noise_std=noise_std,
                )
            )
            for e in self.experts
        ]
        if banks is None:
            h = 2 * d_model if d_hidden is None else int(d_hidden)
            banks = [MLPExperts(e, d_model, h, activation="gelu", bias=True) for e in self.experts]
        banks = list(banks)
        if len(banks) != len(self.experts):
            raise ValueError(f"need one bank per level ({len(self.experts)}), got {len(banks)}")
        for level, (bank, e) in enumerate(zip(banks, self.experts, strict=True)):
            if bank.num_experts != e or bank.d_in != d_model or bank.d_out != d_model:
                raise ValueError(
                    f"level {level}: bank must map {d_model} -> {d_model} with {e} experts, "
                    f"got {bank.d_in} -> {bank.d_out} with {bank.num_experts}"
                )
        parents = [1, *self.experts[:-1]]
        self.levels = nn.ModuleList(
            TreeLevelLayer(r, b, p, residual)
            for r, b, p in zip(routers, banks, parents, strict=True)
        )

    def extra_repr(self) -> str:
        return f"experts={self.experts}, capacity_factor={self.capacity_factor}, d={self.d_model}"

    def capacities(self, num_tokens: int) -> list[int]:
        """Rows per expert at every level for groups of ``num_tokens`` tokens."""
        return tree_capacities(num_tokens, self.experts, self.capacity_factor)

    def forward(self, x: torch.Tensor) -> list[TreeLevel]:
        """Run every level.

        Parameters
        ----------
        x : Tensor, shape (G, T, d)
            ``G`` groups of ``T`` tokens.

        Returns
        -------
        list of TreeLevel
            One per level, root first.
        """
        if x.dim() != 3 or x.shape[2] != self.d_model:
            raise ValueError(
                f"x must have shape (groups, tokens, {self.d_model}), got {tuple(x.shape)}"
            )
        G, T = x.shape[:2]
        caps = self.capacities(T)
        rows = x.reshape(G * T, self.d_model)
        token = torch.arange(T, device=x.device).repeat(G)
        levels = []
        for layer, E, k in zip(self.levels, self.experts, caps, strict=True):
            probs = layer.router.tree_scores(rows, layer.parents, G)
            out, info = layer(rows, groups=G, scores=probs, return_routing=True)
            source = info.routing.source
            b = E // layer.parents
            levels.append(TreeLevel(info.routing, source, token[source], probs, out, G, E, k, b))
            rows, token = out, token[source]
        return levels


def tree_level_usage_loss(level: TreeLevel) -> torch.Tensor:
    """:func:`~sci_moe.moe.usage_mse_loss` of one tree level, parents as groups (over the batch).

    The candidates of parent ``p`` are its rows in every group (sample), scored over
    its ``b`` children: ``candidate_probs`` ``(G, P, k_prev, b)`` is read as ``P``
    groups of ``G k_prev`` candidates.

    Parameters
    ----------
    level : TreeLevel
        One level of a :class:`TreeExpertChoice` forward.

    Returns
    -------
    Tensor, shape ()
    """
    p = level.candidate_probs  # (G, P, k_prev, b)
    return usage_mse_loss(p.transpose(0, 1).flatten(1, 2))


@torch.no_grad()
def tree_level_diagnostics(level: TreeLevel, num_candidates: int) -> dict:
    """Summary statistics of one tree level.

    Parameters
    ----------
    level : TreeLevel
        One level of a :class:`TreeExpertChoice` forward.
    num_candidates : int
        Candidate rows per group at this level (``T`` at level 0, else
        ``E_{l-1} k_{l-1}``).

    Returns
    -------
    dict
        ``num_experts``, ``capacity``, ``load_min``/``load_max`` (rows per expert, over
        the batch), ``coverage`` (fraction of candidate rows chosen by >= 1 child),
        ``overlap`` (mean children per chosen row), ``usage_entropy`` (entropy of the
        mean sibling scores, divided by ``log b``; 1 = uniform), ``mean_weight``.
    """
    G, E, k = level.num_groups, level.num_experts, level.capacity
    load = torch.bincount(level.expert, minlength=E).double()
    src = level.source.remainder(num_candidates * G)
    chosen = torch.bincount(src, minlength=num_candidates * G)
    picked = (chosen > 0).double()
    usage = level.candidate_probs.double().flatten(0, 2).mean(0)
    b = level.branching
    ent = float(-(usage * usage.clamp_min(1e-300).log()).sum() / math.log(b)) if b > 1 else 1.0
    return {
        "num_experts": E,
        "capacity": k,
        "load_min": float(load.min()),
        "load_max": float(load.max()),
        "coverage": float(picked.mean()),
        "overlap": float(chosen[chosen > 0].double().mean()) if picked.any() else 0.0,
        "usage_entropy": ent,
        "mean_weight": float(level.weights.double().mean()),
    }
