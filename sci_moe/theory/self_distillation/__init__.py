"""Replica theory and simulation of optimal multi-stage self-distillation.

Takanami, Takahashi and Sakata, "The Effect of Optimal Self-Distillation in Noisy Gaussian
Mixture Model" (NeurIPS 2025, arXiv:2501.16226): a linear classifier on a noisy two-cluster
Gaussian mixture, retrained on its own (soft or hard) pseudo-labels. :func:`solve_stage0` and
:func:`solve_multistage` solve the replica-symmetric saddle point, :func:`simulate` runs the
same model at finite ``N``, :func:`optimize_sd` tunes the stages' ridge and temperature.
"""

from .empirical import (
    EmpiricalSDConfig,
    EmpiricalSDResult,
    LinearProbe,
    Standardizer,
    breast_cancer_demo,
    fit_self_distillation,
    inject_label_noise,
    train_probe_stages,
)
from .limits import hebbian_error, hebbian_error_noiseless
from .model import LOSSES, SelfDistillationModel, classification_error
from .multistage import MultiStageResult, pseudo_labels, solve_multistage
from .optimal import OptimalSD, optimize_sd, sweep_alpha
from .prox import loss_derivative, prox_bce, prox_mse, solve_prox
from .quadrature import gauss_hermite, gaussian_points
from .simulate import SimulationResult, sample_mixture, simulate, train_stage, train_stages
from .solver import ConvergenceError, SolverConfig
from .stage0 import StageResult, solve_stage0

__all__ = [
    "LOSSES",
    "ConvergenceError",
    "EmpiricalSDConfig",
    "EmpiricalSDResult",
    "LinearProbe",
    "MultiStageResult",
    "OptimalSD",
    "SelfDistillationModel",
    "SimulationResult",
    "SolverConfig",
    "StageResult",
    "Standardizer",
    "breast_cancer_demo",
    "classification_error",
    "fit_self_distillation",
    "gauss_hermite",
    "gaussian_points",
    "hebbian_error",
    "hebbian_error_noiseless",
    "inject_label_noise",
    "loss_derivative",
    "optimize_sd",
    "prox_bce",
    "prox_mse",
    "pseudo_labels",
    "sample_mixture",
    "simulate",
    "solve_multistage",
    "solve_prox",
    "solve_stage0",
    "sweep_alpha",
    "train_probe_stages",
    "train_stage",
    "train_stages",
]
