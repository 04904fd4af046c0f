"""Replica theory and simulation of optimal multi-stage self-distillation.

Takanami, Takahashi and Sakata, "The Effect of Optimal Self-Distillation in Noisy Gaussian
Mixture Model" (NeurIPS 2025, arXiv:2501.16226): a linear classifier on a noisy two-cluster
Gaussian mixture, retrained on its own (soft or hard) pseudo-labels. :func:`solve_stage0` and
:func:`solve_multistage` solve the replica-symmetric saddle point, :func:`simulate` runs the
same model at finite ``N``, :func:`optimize_sd` tunes the stages' ridge and temperature;
:func:`fit_self_distillation` and :func:`probe_sd_experiment` run it on real features, such as
the MiniLM sentence embeddings of :func:`newsgroup_sentences` (:func:`cached_embeddings`).
"""

from .empirical import (
    EmpiricalSDConfig,
    EmpiricalSDResult,
    LinearProbe,
    Standardizer,
    breast_cancer_demo,
    fit_self_distillation,
    grouped_split,
    inject_label_noise,
    probe_sd_experiment,
    train_probe_stages,
)
from .features import (
    MINILM_DIM,
    cached_embeddings,
    clean_post,
    default_cache_path,
    embed_texts,
    load_mini_newsgroups,
    minilm_model_path,
    newsgroup_sentences,
    split_sentences,
    text_hash,
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
    "MINILM_DIM",
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
    "cached_embeddings",
    "classification_error",
    "clean_post",
    "default_cache_path",
    "embed_texts",
    "fit_self_distillation",
    "gauss_hermite",
    "gaussian_points",
    "grouped_split",
    "hebbian_error",
    "hebbian_error_noiseless",
    "inject_label_noise",
    "load_mini_newsgroups",
    "loss_derivative",
    "minilm_model_path",
    "newsgroup_sentences",
    "optimize_sd",
    "probe_sd_experiment",
    "prox_bce",
    "prox_mse",
    "pseudo_labels",
    "sample_mixture",
    "simulate",
    "solve_multistage",
    "solve_prox",
    "solve_stage0",
    "split_sentences",
    "sweep_alpha",
    "text_hash",
    "train_probe_stages",
    "train_stage",
    "train_stages",
]
