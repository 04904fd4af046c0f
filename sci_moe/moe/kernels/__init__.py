"""Triton kernels of the MoE core: grouped expert GEMMs that read rows through indices.

Optional: they need ``triton`` (``pip install 'sci-moe[triton]'``) and a CUDA device, or
the CPU under ``TRITON_INTERPRET=1`` (Triton's interpreter; set it before triton is
imported; slow, for tests only). Importing this package never imports triton.

* :func:`scatter_grouped_linear`: scatter2scatter-style grouped GEMM (ScatterMoE,
  arXiv 2403.08245): rows gathered from the token matrix through the dispatch plan and
  optionally written back per (token, slot), routing weights fused in the epilogue;
  forward and backward (input, weight and routing-weight gradients) in Triton,
  float32 accumulation, deterministic (no atomics), no host synchronisation.
* :func:`triton_grouped_linear`: the same kernels for rows already sorted by expert;
  :meth:`~sci_moe.moe.ExpertBank.grouped_linear` calls it automatically for CUDA tensors when
  :func:`use_kernels` says so (switch off with :func:`set_kernels_enabled` or
  ``SCI_MOE_KERNELS=0``).
"""

from .ops import (
    kernel_supported,
    kernels_enabled,
    scatter_grouped_linear,
    set_kernels_enabled,
    triton_available,
    triton_grouped_linear,
    use_kernels,
)

__all__ = [
    "kernel_supported",
    "kernels_enabled",
    "scatter_grouped_linear",
    "set_kernels_enabled",
    "triton_available",
    "triton_grouped_linear",
    "use_kernels",
]
