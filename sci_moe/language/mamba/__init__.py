"""Mamba (v1) and Routing Mamba (RoM) blocks for the MoE language model.

:class:`MambaBlock` is a pure-torch selective state-space block (Gu & Dao 2023) in the
parameter layout of transformers' ``MambaMixer`` (:func:`from_transformers_mixer`),
with a parallel chunked scan (:func:`selective_scan`), a fused recurrent scan for the CPU
(:func:`selective_scan_recurrent`), the step-by-step reference
(:func:`selective_scan_reference`) and a constant-size :class:`MambaState` for
generation; on CUDA the scan runs as Triton kernels (:func:`triton_selective_scan`,
chosen automatically). :class:`RoMBlock` (Zhan et al., NeurIPS 2025) routes its Conv, Gate and Out
projections through core expert banks driven by one shared :class:`~sci_moe.moe.Routing`.
"""

from .block import MambaBlock, MambaConfig, MambaState
from .generate import initial_states, lm_step, recurrent_generate
from .interop import config_from_transformers, from_transformers_mixer
from .recurrent import ScanWorkspace, selective_scan_recurrent
from .rom import PROJECTIONS, RoMBlock, RoMConfig, RoMProjection
from .scan import (
    linear_scan,
    selective_scan,
    selective_scan_reference,
    selective_state_step,
)
from .scan_kernel import (
    triton_scan_available,
    triton_scan_supported,
    triton_selective_scan,
    use_triton_scan,
)

__all__ = [
    "PROJECTIONS",
    "MambaBlock",
    "MambaConfig",
    "MambaState",
    "RoMBlock",
    "RoMConfig",
    "RoMProjection",
    "ScanWorkspace",
    "config_from_transformers",
    "from_transformers_mixer",
    "initial_states",
    "linear_scan",
    "lm_step",
    "recurrent_generate",
    "selective_scan",
    "selective_scan_recurrent",
    "selective_scan_reference",
    "selective_state_step",
    "triton_scan_available",
    "triton_scan_supported",
    "triton_selective_scan",
    "use_triton_scan",
]
