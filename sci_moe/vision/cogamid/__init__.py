"""CoGaMiD: class-incremental segmentation with Gaussian-mixture feature replay.

CoGaMiD (Zhu et al., NeurIPS 2025, "Continual Gaussian Mixture Distribution Modeling for
Class Incremental Semantic Segmentation") stores, for every old class, a Gaussian mixture
of penultimate pixel features and replays pseudo-features sampled from it when new classes
arrive. The method has no router and no expert bank: nothing in it is routed.

* :mod:`~sci_moe.vision.cogamid.model`: the per-class mixture memory
  (:class:`GaussianMixtureMemory`, EM by the shared
  :func:`sci_moe.stats.fit_gaussian_mixture`), the contrastive constraint
  :func:`grc_loss` and the pixel features a memory is fitted on (:func:`step_features`);
* :mod:`~sci_moe.vision.cogamid.baselines`: the single-prototype replay
  (:class:`PrototypeMemory`);
* :mod:`~sci_moe.vision.cogamid.data`: procedural multimodal scenes with exact masks
  (:class:`SceneGenerator`), the offline demo world;
* :mod:`~sci_moe.vision.cogamid.train`: the incremental protocol on the training engine
  (:func:`run_incremental`, ``sci-moe train cogamid`` on the command line).

The protocol (task splits, background shift, mIoU), the UNet and the PNG folder loader are
the field's, in :mod:`sci_moe.vision`.
"""

from .baselines import PrototypeMemory
from .data import SceneConfig, SceneGenerator
from .model import GaussianMixtureMemory, grc_loss, step_features
from .train import IncrementalConfig, run_incremental

__all__ = [
    "GaussianMixtureMemory",
    "IncrementalConfig",
    "PrototypeMemory",
    "SceneConfig",
    "SceneGenerator",
    "grc_loss",
    "run_incremental",
    "step_features",
]
