"""Hierarchical (tree) expert-choice routing.

:class:`TreeExpertChoice` is a tree of expert banks (e.g. ``2 -> 4 -> 8 -> 16`` experts)
in which every expert *chooses* its tokens (expert-choice routing with capacity, Zhou et
al. 2022) and a child expert may choose only among the rows its parent produced, so the
outputs of a level are re-routed to the children of each expert (MoRE-Brain, Wei et al.,
NeurIPS 2025). Every level runs through the core's one dispatch path
(:func:`~sci_moe.moe.dispatch` on a :meth:`~sci_moe.moe.Routing.from_assignments`
routing) and a core expert bank. :class:`TreeLevel` holds what one level selected;
:func:`tree_capacities` the rows each expert chooses. The per-level usage loss is
:func:`~sci_moe.moe.tree_level_usage_loss`, the per-level summary
:func:`~sci_moe.moe.tree_level_diagnostics`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .dispatch import dispatch
from .experts import ExpertBank, MLPExperts
from .router import Router, RouterConfig
from .routing import Routing

__all__ = ["TreeExpertChoice", "TreeLevel", "tree_capacities"]


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
    every group (:func:`tree_capacities`).

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
    routers : ModuleList of Router
        ``routers[l].weight``, shape ``(E_l, d)``; expert-choice configs.
    banks : ModuleList of ExpertBank
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
        self.routers = nn.ModuleList(
            Router(
                RouterConfig(
                    d_model=d_model,
                    num_experts=e,
                    top_k=1,
                    mode="expert_choice",
                    capacity_factor=capacity_factor,
                    noise_std=noise_std,
                )
            )
            for e in self.experts
        )
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
        self.banks = nn.ModuleList(banks)

    def extra_repr(self) -> str:
        return f"experts={self.experts}, capacity_factor={self.capacity_factor}, d={self.d_model}"

    def capacities(self, num_tokens: int) -> list[int]:
        """Rows per expert at every level for groups of ``num_tokens`` tokens."""
        return tree_capacities(num_tokens, self.experts, self.capacity_factor)

    def _scores(self, level: int, cand: torch.Tensor, parents: int) -> torch.Tensor:
        # cand (G, P, k_prev, d) -> sibling softmax (G, P, k_prev, b)
        router = self.routers[level]
        b = self.experts[level] // parents
        dtype = torch.promote_types(cand.dtype, torch.float32)
        w = router.weight.to(dtype).view(parents, b, -1)
        logits = torch.einsum("gpkd,pbd->gpkb", cand.to(dtype), w)
        if self.training and router.config.noise_std > 0:
            logits = logits + router.config.noise_std * torch.randn_like(logits)
        return logits.softmax(-1)

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
        parents, k_prev, levels = 1, T, []
        for level, (E, k) in enumerate(zip(self.experts, caps, strict=True)):
            b = E // parents
            cand = rows.view(G, parents, k_prev, self.d_model)
            probs = self._scores(level, cand, parents)
            score, idx = probs.topk(k, dim=2)  # (G, P, k, b)
            score = score.permute(0, 1, 3, 2).reshape(-1)  # rows (g, p, c, slot)
            idx = idx.permute(0, 1, 3, 2)
            base = (torch.arange(G * parents, device=x.device) * k_prev).view(G, parents, 1, 1)
            source = (base + idx).reshape(-1)
            expert = torch.arange(E, device=x.device).view(1, E, 1).expand(G, E, k).reshape(-1, 1)
            w = score.view(-1, 1).to(rows.dtype)
            # The selection was made here; scores over all E (for aux losses) are the
            # weights scattered (0 elsewhere), logits their zero-based stand-in.
            flat = torch.zeros(w.shape[0], E, dtype=probs.dtype, device=x.device)
            flat = flat.scatter(1, expert, score.view(-1, 1))
            routing = Routing.from_assignments(expert, w, E, probs=flat, logits=flat)
            inp = rows[source]
            out = dispatch(inp, routing, self.banks[level])
            if self.residual:
                out = inp + out
            levels.append(TreeLevel(routing, source, token[source], probs, out, G, E, k, b))
            rows, token, parents, k_prev = out, token[source], E, k
        return levels
