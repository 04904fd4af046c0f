"""Class-incremental semantic segmentation with Gaussian-mixture feature replay (CoGaMiD).

CoGaMiD (Zhu et al., NeurIPS 2025, "Continual Gaussian Mixture Distribution Modeling for
Class Incremental Semantic Segmentation") stores, for every old class, a Gaussian mixture
of penultimate pixel features and replays pseudo-features sampled from it when new classes
arrive. This package holds the per-class memories, a procedural multimodal scene
generator with exact masks, the background-shift protocol, a small UNet and the
incremental training loop with fine-tuning and single-prototype baselines. The EM fit of
the mixtures is the core's :func:`sci_moe.moe.fit_gaussian_mixture`.
"""

from .folders import load_segmentation_folder
from .incremental import IncrementalConfig, grc_loss, run_incremental, step_features
from .memory import GaussianMixtureMemory, PrototypeMemory
from .protocol import background_shift_labels, incremental_tasks, mean_iou, per_class_iou
from .synthetic import SceneConfig, SceneGenerator
from .unet import SmallUNet

__all__ = [
    "GaussianMixtureMemory",
    "IncrementalConfig",
    "PrototypeMemory",
    "SceneConfig",
    "SceneGenerator",
    "SmallUNet",
    "background_shift_labels",
    "grc_loss",
    "incremental_tasks",
    "load_segmentation_folder",
    "mean_iou",
    "per_class_iou",
    "run_incremental",
    "step_features",
]
