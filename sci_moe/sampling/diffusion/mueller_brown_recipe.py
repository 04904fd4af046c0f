"""The Mueller-Brown energy-diffusion networks: one MLP energy or ScoreMD's time mixture.

ScoreMD's two-dimensional Mueller-Brown setup (Plainer et al., NeurIPS 2025) at CPU
scale: ``plain``/``fp`` train one MLP energy (three hidden layers of 92) on all of
``t in [0, 1]``; ``moe``/``both`` a time mixture on ScoreMD's ranges [0.6, 1],
[0.099, 0.6], [1e-5, 0.099] (the same as :data:`~.alanine_recipe.ALANINE_RANGES`) of
two MLP scores (hidden 54, 54 and 64, 64) and, on the smallest times, the MLP energy
(three hidden layers of 64) that is the MD force field. Used by the energy-diffusion
benchmark (``benchmarks/energy_diffusion``).
"""

from __future__ import annotations

from torch import nn

from .alanine_recipe import ALANINE_RANGES, ALANINE_VARIANTS
from .networks import MLPEnergy, MLPScore
from .time_moe import TimeMixture

__all__ = ["MUELLER_BROWN_RANGES", "MUELLER_BROWN_VARIANTS", "mueller_brown_model"]

#: Time ranges of the time mixture's three experts, high t first (ScoreMD's, as for alanine).
MUELLER_BROWN_RANGES = ALANINE_RANGES
#: ``plain``/``fp``: one MLP energy (without/with FP); ``moe``/``both``: the time mixture.
MUELLER_BROWN_VARIANTS = ALANINE_VARIANTS


def mueller_brown_model(variant: str) -> nn.Module:
    """The network of ``variant`` for one two-dimensional particle, inputs ``(B, 1, 2)``.

    Parameters
    ----------
    variant : str
        One of :data:`MUELLER_BROWN_VARIANTS`: ``"plain"`` or ``"fp"`` (one
        :class:`~.networks.MLPEnergy` with hidden sizes 92, 92, 92 on ``t in [0, 1]``),
        ``"moe"`` or ``"both"`` (a ranged :class:`~.time_moe.TimeMixture` of two
        :class:`~.networks.MLPScore` and an :class:`~.networks.MLPEnergy` on
        :data:`MUELLER_BROWN_RANGES`). The variants differ only in training (the FP
        regulariser), not in the network.

    Returns
    -------
    torch.nn.Module
        With ``energy(x, t)`` (the small-t expert's for the mixture) and ``score(x, t)``;
        freshly initialised from torch's global generator.

    Examples
    --------
    >>> mueller_brown_model("both").ranges[2]
    (1e-05, 0.099)
    """
    if variant not in MUELLER_BROWN_VARIANTS:
        raise ValueError(f"variant must be one of {MUELLER_BROWN_VARIANTS}, got {variant!r}")
    if variant in ("plain", "fp"):
        return MLPEnergy((1, 2), (92, 92, 92), t_range=(0.0, 1.0))
    return TimeMixture(
        [
            MLPScore((1, 2), (54, 54), t_range=MUELLER_BROWN_RANGES[0]),
            MLPScore((1, 2), (64, 64), t_range=MUELLER_BROWN_RANGES[1]),
            MLPEnergy((1, 2), (64, 64, 64), t_range=MUELLER_BROWN_RANGES[2]),
        ],
        MUELLER_BROWN_RANGES,
    )
