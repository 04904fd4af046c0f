"""The recipe of the shipped alanine-dipeptide energy model: networks and training stages.

ScoreMD's alanine-dipeptide setup (Plainer et al., NeurIPS 2025) at CPU scale: a time
mixture of three SE(3)-invariant MLP energies (:class:`~.networks.InvariantMLPEnergy`:
pairwise distances + signed volumes, so chirality is seen) on t in [0.6, 1],
[0.099, 0.6], [1e-5, 0.099], trained high t first (10/20/70 % of the epochs, mids
0.8/0.35/0.03) with the Fokker-Planck regulariser (weight 1e-3, ScoreMD's "Both" for ALDP)
on the small-t expert, which is the force field. Used by
``scripts/train_alanine_energy_model.py`` (the shipped model) and ``sci-moe train
diffusion``.
"""

from __future__ import annotations

from torch import nn

from .networks import InvariantMLPEnergy
from .time_moe import TimeMixture
from .train_config import Stage

__all__ = ["ALANINE_RANGES", "ALANINE_VARIANTS", "alanine_model", "alanine_stages"]

#: Time ranges of the three experts, high t first.
ALANINE_RANGES = [(0.6, 1.0), (0.099, 0.6), (1e-5, 0.099)]
#: ``plain``/``fp``: one network (without/with FP); ``moe``/``both``: the time mixture.
ALANINE_VARIANTS = ("plain", "fp", "moe", "both")


def alanine_model(variant: str, n_atoms: int = 5) -> nn.Module:
    """The network of ``variant`` for ``n_atoms`` particles (5 backbone beads by default)."""
    if variant not in ALANINE_VARIANTS:
        raise ValueError(f"variant must be one of {ALANINE_VARIANTS}, got {variant!r}")
    if variant in ("plain", "fp"):
        return InvariantMLPEnergy(n_atoms, (256, 256, 256), t_range=(0.0, 1.0))
    return TimeMixture(
        [
            InvariantMLPEnergy(n_atoms, (128, 128), t_range=ALANINE_RANGES[0]),
            InvariantMLPEnergy(n_atoms, (128, 128), t_range=ALANINE_RANGES[1]),
            InvariantMLPEnergy(n_atoms, (256, 256, 256), t_range=ALANINE_RANGES[2]),
        ],
        ALANINE_RANGES,
    )


def alanine_stages(
    variant: str, epochs: int, lr: float, high=None, low=None, fp_epochs=None
) -> list[Stage]:
    """ScoreMD's schedule: 10 / 20 / 70 % of the epochs per expert, high t first.

    Parameters
    ----------
    variant : str
        One of :data:`ALANINE_VARIANTS`.
    epochs : int
        All epochs (split over the experts of a time mixture).
    lr : float
        Peak learning rate of every stage (cosine to 1e-5).
    high : (int, int), optional
        Epochs of the two high-t experts (0 skips one).
    low : int, optional
        Epochs of the small-t expert.
    fp_epochs : int, optional
        Variant ``both``: the small-t expert trains ``low`` epochs with DSM only (an FP
        step costs ~10x a DSM step on CPU), then ``fp_epochs`` epochs with the FP term at
        0.3 x ``lr`` (a fine-tune).

    Returns
    -------
    list of Stage
    """
    if variant not in ALANINE_VARIANTS:
        raise ValueError(f"variant must be one of {ALANINE_VARIANTS}, got {variant!r}")
    if variant in ("plain", "fp"):
        return [Stage(epochs, (1e-5, 1.0), 0.3, 5e-4 if variant == "fp" else 0.0, lr=lr)]
    e1, e2 = high if high is not None else (max(1, epochs // 10), max(1, epochs // 5))
    e3 = low if low is not None else max(1, epochs - e1 - e2)
    fp = 1e-3 if variant == "both" else 0.0
    out = [
        Stage(e1, ALANINE_RANGES[0], 0.8, 0.0, expert=0, lr=lr),
        Stage(e2, ALANINE_RANGES[1], 0.35, 0.0, expert=1, lr=lr),
        Stage(e3, ALANINE_RANGES[2], 0.03, 0.0 if fp_epochs else fp, expert=2, lr=lr),
    ]
    if fp_epochs:
        if fp == 0:
            raise ValueError("fp_epochs needs the variant 'both' (a time mixture with FP)")
        out.append(Stage(fp_epochs, ALANINE_RANGES[2], 0.03, fp, expert=2, lr=0.3 * lr))
    return out
