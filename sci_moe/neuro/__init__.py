"""Brain decoding with hierarchical expert-choice MoE, a thin layer on :mod:`sci_moe.moe`.

MoRE-Brain stage 1 (Wei et al., NeurIPS 2025, arXiv 2505.15946): subject front ends
(:class:`SubjectFrontEnd`), the hierarchical expert-choice encoder
(:class:`MoREBrainEncoder` on :class:`~sci_moe.moe.TreeExpertChoice`), contrastive +
MSE training to frozen target embeddings (:func:`train_encoder`, on the package's training
engine; ``sci-moe train more-brain``), retrieval
(:func:`retrieval_accuracy`), router-only transfer to a new subject
(:func:`finetune_routers`), a ridge baseline (:class:`RidgeDecoder`), voxel -> expert
maps scored against planted regions (:func:`voxel_assignments`,
:func:`assignment_scores`), planted voxel data with known regions (:func:`plant_voxels`)
and a loader for user voxel matrices (:func:`load_voxel_matrix`). Stage 2 (image
generation) is out of scope.

The tree routing (:class:`~sci_moe.moe.TreeExpertChoice`, its losses and diagnostics) is
core code: import it from :mod:`sci_moe.moe`.
"""

from .baselines import RidgeDecoder
from .encoder import EncoderOutput, MoREBrainConfig, MoREBrainEncoder
from .frontend import SubjectFrontEnd, check_voxels
from .interpret import assignment_scores, voxel_assignments
from .io import load_voxel_matrix
from .planted import PlantedFMRI, plant_voxels, roi_labels
from .train import (
    EncoderRun,
    TrainConfig,
    contrastive_loss,
    finetune_routers,
    predict,
    retrieval_accuracy,
    train_encoder,
)

__all__ = [
    "EncoderOutput",
    "EncoderRun",
    "MoREBrainConfig",
    "MoREBrainEncoder",
    "PlantedFMRI",
    "RidgeDecoder",
    "SubjectFrontEnd",
    "TrainConfig",
    "assignment_scores",
    "check_voxels",
    "contrastive_loss",
    "finetune_routers",
    "load_voxel_matrix",
    "plant_voxels",
    "predict",
    "retrieval_accuracy",
    "roi_labels",
    "train_encoder",
    "voxel_assignments",
]
