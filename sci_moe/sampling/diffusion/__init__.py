"""Energy-based diffusion models with Fokker-Planck regularisation (ScoreMD).

Plainer, Wu, Klein, Guennemann, Noe, "Consistent Sampling and Simulation: Molecular Dynamics
with Energy-Based Diffusion Models", NeurIPS 2025 (arXiv 2506.17139). A diffusion model with
an energy-parameterised score :math:`s_\\theta = -\\nabla_x E_\\theta(x, t)` is trained by
denoising score matching plus a Fokker-Planck residual regulariser; its energy at
``t -> 0`` is then a force field for molecular dynamics, and i.i.d. samples (reverse SDE)
and MD with the learned forces agree.

Modules: :mod:`.sde` (VP/VE SDEs), :mod:`.networks` (MLP and SE(3)-invariant molecular
energy nets), :mod:`.losses` (DSM, exact and two-probe FP residuals), :mod:`.time_moe`
(mixture of experts over diffusion time on ``sci_moe.moe`` gating), :mod:`.samplers`,
:mod:`.train` (on the package's training engine; ``sci-moe train diffusion``) with its
options in :mod:`.train_config`,
:mod:`.alanine_recipe` (the shipped alanine model's networks and stages),
:mod:`.mueller_brown_recipe` (the Mueller-Brown benchmark's networks), :mod:`.io` (model
files for ``sci-moe md run --model``), :mod:`.metrics`.
"""

from .alanine_recipe import ALANINE_VARIANTS, alanine_model, alanine_stages
from .io import (
    ALANINE_MODEL,
    EnergyAtTime,
    load_diffusion_model,
    load_energy_model,
    save_energy_model,
)
from .losses import dsm_loss, fp_loss, fp_residual_exact, fp_residual_probe, time_weight
from .metrics import bond_wasserstein, fp_error_curve, js_divergence, pmf_error
from .mixture_energy import DiffusedMixtureEnergy
from .mueller_brown_recipe import (
    MUELLER_BROWN_RANGES,
    MUELLER_BROWN_VARIANTS,
    mueller_brown_model,
    mueller_brown_stages,
)
from .networks import (
    EnergyNet,
    InvariantEnergyNet,
    InvariantMLPEnergy,
    MLPEnergy,
    MLPScore,
    ScoreNet,
    energy_and_score,
    score_from_energy,
)
from .samplers import probability_flow_sample, reverse_sde_sample
from .sde import SDE, VESDE, VPSDE, time_features
from .time_moe import TimeMixture
from .train import random_rotations, train
from .train_config import Stage, TrainConfig

__all__ = [
    "ALANINE_MODEL",
    "ALANINE_VARIANTS",
    "MUELLER_BROWN_RANGES",
    "MUELLER_BROWN_VARIANTS",
    "SDE",
    "VESDE",
    "VPSDE",
    "DiffusedMixtureEnergy",
    "EnergyAtTime",
    "EnergyNet",
    "InvariantEnergyNet",
    "InvariantMLPEnergy",
    "MLPEnergy",
    "MLPScore",
    "ScoreNet",
    "Stage",
    "TimeMixture",
    "TrainConfig",
    "alanine_model",
    "alanine_stages",
    "bond_wasserstein",
    "dsm_loss",
    "energy_and_score",
    "fp_error_curve",
    "fp_loss",
    "fp_residual_exact",
    "fp_residual_probe",
    "js_divergence",
    "load_diffusion_model",
    "load_energy_model",
    "mueller_brown_model",
    "mueller_brown_stages",
    "pmf_error",
    "probability_flow_sample",
    "random_rotations",
    "reverse_sde_sample",
    "save_energy_model",
    "score_from_energy",
    "time_features",
    "time_weight",
    "train",
]
