"""MoRE-Brain stage 1: voxels -> hierarchical expert-choice MoE -> frozen embedding space."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..frontend import SubjectFrontEnd
from .tree import TreeExpertChoice, TreeLevel, tree_level_usage_loss

__all__ = ["EncoderOutput", "MoREBrainConfig", "MoREBrainEncoder"]

_FUSIONS = ("mean", "learned")


@dataclass
class MoREBrainConfig:
    """Options of a :class:`MoREBrainEncoder`.

    Parameters
    ----------
    voxels_per_subject : mapping of str to int
        Voxel count of each training subject.
    target_dim : int
        Size of the frozen target embedding (384 for all-MiniLM-L6-v2).
    d_model : int
        Voxel-token size ``d``.
    experts : sequence of int
        Experts per level (MoRE-Brain: ``(2, 4, 8, 16)``; ``(16,)`` is a flat MoE).
    capacity_factor : float
        Expert-choice capacity factor ``c_f`` (MoRE-Brain: 1).
    d_hidden : int
        Hidden size of each MLP expert.
    residual : bool
        Experts add their weighted output to their input row.
    noise_std : float
        Router logit noise in training (MoRE-Brain code: 1e-3).
    fusion : {"mean", "learned"}
        Average the level embeddings (MoRE-Brain stage 1) or mix them with learned
        softmax weights.
    """

    voxels_per_subject: Mapping[str, int]
    target_dim: int = 384
    d_model: int = 32
    experts: Sequence[int] = (2, 4, 8, 16)
    capacity_factor: float = 1.0
    d_hidden: int = 64
    residual: bool = True
    noise_std: float = 1e-3
    fusion: str = "mean"

    def __post_init__(self) -> None:
        if not self.voxels_per_subject:
            raise ValueError("voxels_per_subject must name at least one subject")
        self.voxels_per_subject = {str(k): int(v) for k, v in self.voxels_per_subject.items()}
        self.experts = tuple(int(e) for e in self.experts)
        for name in ("target_dim", "d_model", "d_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.fusion not in _FUSIONS:
            raise ValueError(f"fusion must be one of {_FUSIONS}, got {self.fusion!r}")


@dataclass
class EncoderOutput:
    """What :meth:`MoREBrainEncoder.forward` returns.

    Attributes
    ----------
    embedding : Tensor, shape (B, target_dim)
        Fused prediction of the target embedding.
    level_embeddings : list of Tensor, shape (B, target_dim)
        One prediction per level (root first).
    levels : list of TreeLevel
        The routing of every level (rows, experts, scores).
    usage_loss : Tensor, shape ()
        Mean over levels of :func:`~sci_moe.moe.usage_mse_loss`.
    """

    embedding: torch.Tensor
    level_embeddings: list[torch.Tensor]
    levels: list[TreeLevel]
    usage_loss: torch.Tensor


class MoREBrainEncoder(nn.Module):
    """Hierarchical expert-choice MoE from voxels to a frozen embedding space.

    MoRE-Brain stage 1 (Wei et al., NeurIPS 2025, arXiv 2505.15946): a subject front end
    (:class:`~sci_moe.neuro.SubjectFrontEnd`), a tree of expert-choice levels
    (:class:`TreeExpertChoice`:
    ``2 -> 4 -> 8 -> 16`` experts, each expert choosing ``k_l`` of its parent's rows),
    per level a projection of the experts' pooled outputs into the target space,

    .. math:: \\hat y^{(l)} = W^{(l)}\\,\\big[\\bar o^{(l)}_1; \\dots; \\bar o^{(l)}_{E_l}\\big],
              \\qquad \\bar o^{(l)}_e = \\frac{1}{k_l}\\sum_{r \\in e} o_r

    (the concatenation times ``W`` is a sum of per-expert projections, as in the code's
    "summed within a level"), and the fused prediction ``mean_l y^(l)`` (or learned
    softmax level weights).

    Parameters
    ----------
    config : MoREBrainConfig
        Keyword arguments build one when omitted.
    """

    def __init__(self, config: MoREBrainConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = MoREBrainConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a MoREBrainConfig or keyword arguments, not both")
        self.config = c = config
        self.frontend = SubjectFrontEnd(c.voxels_per_subject, c.d_model)
        self.tree = TreeExpertChoice(
            c.d_model,
            c.experts,
            c.capacity_factor,
            d_hidden=c.d_hidden,
            residual=c.residual,
            noise_std=c.noise_std,
        )
        for v in c.voxels_per_subject.values():
            self.tree.capacities(v)  # raises early when a level would be empty
        self.norms = nn.ModuleList(nn.LayerNorm(c.d_model) for _ in c.experts)
        self.projections = nn.ModuleList(nn.Linear(e * c.d_model, c.target_dim) for e in c.experts)
        self.level_logits = nn.Parameter(torch.zeros(len(c.experts)))
        if c.fusion == "mean":
            self.level_logits.requires_grad_(False)

    @property
    def subjects(self) -> list[str]:
        """Subjects the front end knows."""
        return self.frontend.subjects

    def add_subject(self, name: str, num_voxels: int) -> None:
        """Add a new subject (fresh front end; check its capacities fit)."""
        self.tree.capacities(num_voxels)
        self.frontend.add_subject(name, num_voxels)

    # ------------------------------------------------------------ parameter groups

    def router_parameters(self) -> list[nn.Parameter]:
        """Router weights of every level."""
        return [p for lvl in self.tree.levels for p in lvl.router.parameters()]

    def expert_parameters(self) -> list[nn.Parameter]:
        """Expert-bank weights of every level."""
        return [p for lvl in self.tree.levels for p in lvl.experts.parameters()]

    def head_parameters(self) -> list[nn.Parameter]:
        """Level norms, projections and fusion weights."""
        return [*self.norms.parameters(), *self.projections.parameters(), self.level_logits]

    # ------------------------------------------------------------------ forward

    def forward(self, x: torch.Tensor, subject: str) -> EncoderOutput:
        """Predict target embeddings.

        Parameters
        ----------
        x : Tensor, shape (B, V_s)
            Voxel responses of ``subject`` (finite, ``V_s`` columns).
        subject : str

        Returns
        -------
        EncoderOutput
        """
        tokens = self.frontend(x, subject)
        levels = self.tree(tokens)
        preds = []
        for lvl, norm, proj in zip(levels, self.norms, self.projections, strict=True):
            pooled = lvl.per_expert(lvl.output).mean(dim=2)  # (B, E, d)
            preds.append(proj(norm(pooled).flatten(1)))
        w = self.level_logits.softmax(0).to(preds[0].dtype)
        fused = sum(wi * p for wi, p in zip(w, preds, strict=True))
        usage = torch.stack([tree_level_usage_loss(lvl) for lvl in levels]).mean()
        return EncoderOutput(fused, preds, levels, usage)
