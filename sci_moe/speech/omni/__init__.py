"""The Omni-Expert (Saha et al., NeurIPS 2025) and its dereverberation chain for CI speech.

Room acoustics (pyroomacoustics), the causal STFT front end and IRM, phoneme labels
(espeak events and pocketsphinx forced alignment), the CI vocoder with STOI, the mask
models (PI, 40-expert MoE, OE, phoneme classifier), their training and their costs.
"""

from .acoustics import (
    Reverberated,
    RoomConfig,
    RoomImpulseResponse,
    measure_rt60,
    reverberate,
    simulate_rir,
)
from .alignment import event_frame_labels, force_align, label_agreement
from .complexity import ModelCost, model_costs, parameter_count
from .dataset import FrameSet, utterance_frames
from .frontend import (
    FeatureNormalizer,
    FrontEndConfig,
    apply_mask,
    causal_context,
    ideal_ratio_mask,
    istft,
    log_magnitude,
    log_spectral_distance,
    stft,
)
from .models import (
    MaskNetConfig,
    OmniExpertMask,
    PhonemeClassifier,
    PhonemeIndependentMask,
    PhonemeMixture,
    PhonemeMoEMask,
    oracle_probs,
)
from .task_affine import (
    TaskAffineTable,
    bank_macs_per_token,
    task_affine_forward,
    task_affine_macs,
)
from .training import (
    FrameTensors,
    TrainConfig,
    converged,
    fit_model,
    frame_tensors,
    mask_loss,
    train_classifier,
    train_moe,
    train_oe,
    train_pi,
)
from .vocoder import VocoderConfig, ci_vocode, vocoded_stoi

__all__ = [
    "FeatureNormalizer",
    "FrameSet",
    "FrameTensors",
    "FrontEndConfig",
    "MaskNetConfig",
    "ModelCost",
    "OmniExpertMask",
    "PhonemeClassifier",
    "PhonemeIndependentMask",
    "PhonemeMixture",
    "PhonemeMoEMask",
    "Reverberated",
    "RoomConfig",
    "RoomImpulseResponse",
    "TaskAffineTable",
    "TrainConfig",
    "VocoderConfig",
    "apply_mask",
    "bank_macs_per_token",
    "causal_context",
    "ci_vocode",
    "converged",
    "event_frame_labels",
    "fit_model",
    "force_align",
    "frame_tensors",
    "ideal_ratio_mask",
    "istft",
    "label_agreement",
    "log_magnitude",
    "log_spectral_distance",
    "mask_loss",
    "measure_rt60",
    "model_costs",
    "oracle_probs",
    "parameter_count",
    "reverberate",
    "simulate_rir",
    "stft",
    "task_affine_forward",
    "task_affine_macs",
    "train_classifier",
    "train_moe",
    "train_oe",
    "train_pi",
    "utterance_frames",
    "vocoded_stoi",
]
