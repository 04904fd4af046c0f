"""MoRE-Brain stage 1: brain decoding with a hierarchical expert-choice MoE.

Wei et al., NeurIPS 2025 (arXiv 2505.15946). The tree routing (:class:`TreeExpertChoice`:
``2 -> 4 -> 8 -> 16`` experts, each expert choosing ``k_l`` of its parent's rows; its
levels :class:`TreeLevel`, capacities :func:`tree_capacities`, usage loss
:func:`tree_level_usage_loss` and summary :func:`tree_level_diagnostics`), the encoder
from a subject's voxels to a frozen embedding space (:class:`MoREBrainEncoder`, on the
field's :class:`~sci_moe.neuro.SubjectFrontEnd`), contrastive + MSE training on the
package's training engine (:func:`train_encoder`; ``sci-moe train more-brain``),
retrieval (:func:`retrieval_accuracy`), router-only transfer to a new subject
(:func:`finetune_routers`), the ridge baseline (:class:`RidgeDecoder`) and voxel ->
expert maps scored against planted regions (:func:`voxel_assignments`,
:func:`assignment_scores`). Stage 2 (image generation) is out of scope.

The data are the field's: planted voxels with known regions
(:func:`sci_moe.neuro.plant_voxels`; the benchmark's builder with real sentence
embeddings is :func:`sci_moe.data.planted_fmri.planted_fmri`) and user voxel matrices
(:func:`sci_moe.neuro.load_voxel_matrix`).
"""

from .baselines import RidgeDecoder
from .interpret import assignment_scores, voxel_assignments
from .model import EncoderOutput, MoREBrainConfig, MoREBrainEncoder
from .train import (
    EncoderRun,
    TrainConfig,
    contrastive_loss,
    finetune_routers,
    predict,
    retrieval_accuracy,
    train_encoder,
)
from .tree import (
    TreeExpertChoice,
    TreeLevel,
    TreeLevelLayer,
    tree_capacities,
    tree_level_diagnostics,
    tree_level_usage_loss,
)

__all__ = [
    "EncoderOutput",
    "EncoderRun",
    "MoREBrainConfig",
    "MoREBrainEncoder",
    "RidgeDecoder",
    "TrainConfig",
    "TreeExpertChoice",
    "TreeLevel",
    "TreeLevelLayer",
    "assignment_scores",
    "contrastive_loss",
    "finetune_routers",
    "predict",
    "retrieval_accuracy",
    "train_encoder",
    "tree_capacities",
    "tree_level_diagnostics",
    "tree_level_usage_loss",
    "voxel_assignments",
]
