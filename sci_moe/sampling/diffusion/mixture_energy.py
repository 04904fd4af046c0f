"""The exact energy model of a diffused Gaussian mixture (ground truth for FP and samplers)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ...stats import GaussianMixture
from .networks import score_from_energy

__all__ = ["DiffusedMixtureEnergy"]


class DiffusedMixtureEnergy(nn.Module):
    """Exact energy model ``E(x, t) = -log p_t(x) - offset(t)`` of a diffused mixture.

    Parameters
    ----------
    mixture : GaussianMixture
    sde : SDE
    event_shape : sequence of int, optional
        Shape of one sample (default ``(1, D)``; positions are ``(B, 1, D)`` like
        particle systems). ``x`` is flattened to ``(B, D)`` internally.
    code_offset : bool
        Subtract ``(D - 1) log m_t`` from ``log p_t``: the time-dependent constant that
        makes the residual of ScoreMD's code (``+1`` instead of ``+D``) vanish.
    """

    conservative = True

    def __init__(
        self,
        mixture: GaussianMixture,
        sde,
        event_shape: Sequence[int] | None = None,
        code_offset: bool = False,
    ) -> None:
        super().__init__()
        self.mixture, self.sde, self.code_offset = mixture, sde, code_offset
        self.event_shape = tuple(event_shape or (1, mixture.dim))
        if math.prod(self.event_shape) != mixture.dim:
            raise ValueError(f"event_shape {self.event_shape} does not hold {mixture.dim} values")

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy (B,) at positions ``x`` (B, \\*event_shape) and times ``t`` (B,)."""
        lp = self.mixture.diffused_log_prob(x.flatten(1), t, self.sde)
        if self.code_offset:
            lp = lp + (self.mixture.dim - 1) * self.sde.log_mean_coeff(t)
        return -lp

    def energy(self, x, t):
        """Alias of ``forward``."""
        return self(x, t)

    def score(self, x, t, create_graph: bool = False):
        """Exact score ``grad log p_t``."""
        return score_from_energy(self, x, t, create_graph)
