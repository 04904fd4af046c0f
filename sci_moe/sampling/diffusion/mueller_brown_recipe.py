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
from .train_config import Stage

__all__ = [
    "MUELLER_BROWN_RANGES",
    "MUELLER_BROWN_VARIANTS",
    "mueller_brown_model",
    "mueller_brown_stages",
]

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


def mueller_brown_stages(
    variant: str, epochs: int, *, fp_weight: float = 5e-4, lr: float = 3e-4
) -> list[Stage]:
    """ScoreMD's Mueller-Brown schedule: one stage, or 1/6, 1/6 and the rest per expert.

    Parameters
    ----------
    variant : str
        One of :data:`MUELLER_BROWN_VARIANTS`. ``"plain"``/``"fp"``: one stage on
        ``t in [1e-5, 1]`` with time weighting mid 0.5 (``"fp"`` with the Fokker-Planck
        term); ``"moe"``/``"both"``: the time mixture's experts trained one after the
        other, high ``t`` first, on :data:`MUELLER_BROWN_RANGES` with mids 0.8, 0.35 and
        0.05 (ScoreMD: 30 / 30 / 120 of 180 epochs), the FP term on the small-t expert
        only for ``"both"``.
    epochs : int
        All epochs (>= 1), split over the experts of a time mixture (each gets >= 1).
    fp_weight : float
        Weight of the Fokker-Planck residual where it is on (ScoreMD's 5e-4).
    lr : float
        Peak learning rate of every stage.

    Returns
    -------
    list of Stage

    Examples
    --------
    >>> [s.epochs for s in mueller_brown_stages("both", 180)]
    [30, 30, 120]
    """
    if variant not in MUELLER_BROWN_VARIANTS:
        raise ValueError(f"variant must be one of {MUELLER_BROWN_VARIANTS}, got {variant!r}")
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if variant in ("plain", "fp"):
        return [Stage(epochs, (1e-5, 1.0), 0.5, fp_weight if variant == "fp" else 0.0, lr=lr)]
    e_hi = max(1, epochs // 6)
    e_lo = max(1, epochs - 2 * e_hi)
    fp = fp_weight if variant == "both" else 0.0
    return [
        Stage(e_hi, MUELLER_BROWN_RANGES[0], 0.8, 0.0, expert=0, lr=lr),
        Stage(e_hi, MUELLER_BROWN_RANGES[1], 0.35, 0.0, expert=1, lr=lr),
        Stage(e_lo, MUELLER_BROWN_RANGES[2], 0.05, fp, expert=2, lr=lr),
    ]
