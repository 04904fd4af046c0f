"""Replica theory and simulation of optimal multi-stage self-distillation.

Takanami, Takahashi and Sakata, "The Effect of Optimal Self-Distillation in Noisy Gaussian
Mixture Model" (NeurIPS 2025, arXiv:2501.16226): a linear classifier on a noisy two-cluster
Gaussian mixture, retrained on its own (soft or hard) pseudo-labels. :func:`solve_stage0` and
:func:`solve_multistage` solve the replica-symmetric saddle point, :func:`simulate` runs the
same model at finite ``N``, :func:`optimize_sd` tunes the stages' ridge and temperature;
:func:`fit_self_distillation` and :func:`probe_sd_experiment` run it on real features given
as arrays.

Needs only numpy and scipy. The corpus and embedding code of the MiniLM demo is on the data
floor (this package never imports :mod:`sci_moe.data`): ``sci_moe.data.newsgroups``
(:func:`~sci_moe.data.newsgroups.load_mini_newsgroups`, ``clean_post``, ``split_sentences``,
``newsgroup_sentences``) and ``sci_moe.data.minilm`` (``MINILM_DIM``, ``minilm_model_path``,
``embed_texts``, ``text_hash``, ``default_cache_path``, ``cached_embeddings``). Build the
arrays there and pass them here::

    from sci_moe.data.minilm import cached_embeddings, default_cache_path
    from sci_moe.data.newsgroups import newsgroup_sentences
    from sci_moe.theory.self_distillation import EmpiricalSDConfig, probe_sd_experiment

    texts, labels, groups = newsgroup_sentences()
    X = cached_embeddings(texts, default_cache_path())
    errors, _ = probe_sd_experiment(X, labels, theta=0.2, groups=groups)
"""

from .empirical import (
    EmpiricalSDConfig,
    EmpiricalSDResult,
    breast_cancer_demo,
    fit_self_distillation,
    probe_sd_experiment,
)
from .heuristics import early_stopping_stage, stage_gradient
from .limits import hebbian_error, hebbian_error_noiseless
from .model import LOSSES, SelfDistillationModel, classification_error
from .multistage import MultiStageResult, pseudo_labels, solve_multistage
from .optimal import OptimalSD, optimize_sd, sweep_alpha
from .probe import LinearProbe, Standardizer, train_probe_stages
from .prox import loss_derivative, prox_bce, prox_mse, solve_prox
from .quadrature import gauss_hermite, gaussian_points
from .simulate import SimulationResult, sample_mixture, simulate, train_stage, train_stages
from .solver import ConvergenceError, SolverConfig
from .splits import grouped_split, inject_label_noise, stratified_split
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
    "early_stopping_stage",
    "fit_self_distillation",
    "gauss_hermite",
    "gaussian_points",
    "grouped_split",
    "hebbian_error",
    "hebbian_error_noiseless",
    "inject_label_noise",
    "loss_derivative",
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
    "stage_gradient",
    "stratified_split",
    "sweep_alpha",
    "train_probe_stages",
    "train_stage",
    "train_stages",
]
