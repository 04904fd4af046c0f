"""MoE-CAP: sparsity-aware utilisation metrics (S-MBU, S-MFU) and the CAP radar.

Jiang, Fu, Huang et al., "MoE-CAP: Benchmarking Cost, Accuracy and Performance of Sparse
Mixture-of-Experts Systems", NeurIPS 2025 Datasets & Benchmarks (arXiv:2412.07067).

* :class:`ModelSpec` describes a model (from a ``config.json``, a shipped configuration
  via :func:`load_model`, or a sci-moe module via :meth:`ModelSpec.from_module`);
* :class:`Hardware` holds dense datasheet peaks (:func:`get_hardware`: ``"a100"``,
  ``"h100"``, ``"h200"``) or this CPU's measured peaks (:func:`measure_cpu`);
* :func:`cap_metrics` (and :func:`s_mbu`, :func:`s_mfu`) evaluate the paper's Eqs. 4-5
  for a workload; :class:`CapRecorder` measures one on a sci-moe model;
* :func:`cap_radar` draws the Cost-Accuracy-Performance radar diagram.

Everything runs on CPU; nothing is downloaded.
"""

from .dtypes import bytes_per_param, canonical_dtype
from .hardware import Hardware, available_hardware, get_hardware, measure_cpu
from .hf_config import available_models, load_model
from .metrics import (
    EXPERT_COUNTS,
    CapReport,
    activated_counts,
    activated_param_count,
    cap_metrics,
    expected_activated,
    flops_per_token,
    kv_cache_bytes,
    s_mbu,
    s_mfu,
)
from .model import AttentionSpec, ModelSpec, MoELayerSpec
from .radar import DEFAULT_AXES, RadarAxis, cap_radar
from .recorder import CapRecorder, CapStep, used_experts

__all__ = [
    "DEFAULT_AXES",
    "EXPERT_COUNTS",
    "AttentionSpec",
    "CapRecorder",
    "CapReport",
    "CapStep",
    "Hardware",
    "MoELayerSpec",
    "ModelSpec",
    "RadarAxis",
    "activated_counts",
    "activated_param_count",
    "available_hardware",
    "available_models",
    "bytes_per_param",
    "canonical_dtype",
    "cap_metrics",
    "cap_radar",
    "expected_activated",
    "flops_per_token",
    "get_hardware",
    "kv_cache_bytes",
    "load_model",
    "measure_cpu",
    "s_mbu",
    "s_mfu",
    "used_experts",
]
