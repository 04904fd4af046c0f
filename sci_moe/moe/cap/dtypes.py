"""Number formats: canonical names and bytes per parameter for the MoE-CAP metrics."""

from __future__ import annotations

import torch

__all__ = ["bytes_per_param", "canonical_dtype"]

# canonical name -> bytes per element
_BYTES = {
    "float64": 8.0,
    "float32": 4.0,
    "tfloat32": 4.0,
    "bfloat16": 2.0,
    "float16": 2.0,
    "float8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "float4": 0.5,
}

_ALIASES = {
    "fp64": "float64",
    "double": "float64",
    "fp32": "float32",
    "float": "float32",
    "tf32": "tfloat32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp8": "float8",
    "float8_e4m3fn": "float8",
    "float8_e4m3fnuz": "float8",
    "float8_e5m2": "float8",
    "float8_e5m2fnuz": "float8",
    "e4m3": "float8",
    "e5m2": "float8",
    "fp4": "float4",
    "nvfp4": "float4",
    "mxfp4": "float4",
}


def canonical_dtype(dtype: str | torch.dtype) -> str:
    """Canonical name of a number format.

    Parameters
    ----------
    dtype : str or torch.dtype
        A ``torch.dtype`` (``torch.bfloat16``), its name (``"bfloat16"``,
        ``"torch.bfloat16"``) or a common alias (``"bf16"``, ``"fp8"``, ``"half"``).

    Returns
    -------
    str
        One of ``float64, float32, tfloat32, bfloat16, float16, float8, int8, int4,
        float4``.
    """
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        name = dtype.strip().lower().removeprefix("torch.")
    else:
        raise TypeError(f"dtype must be a str or torch.dtype, got {type(dtype).__name__}")
    name = _ALIASES.get(name, name)
    if name not in _BYTES:
        raise ValueError(
            f"unknown number format {dtype!r}; use one of {sorted(_BYTES)} "
            "(or an alias such as bf16, fp16, fp8)"
        )
    return name


def bytes_per_param(dtype: str | torch.dtype) -> float:
    """Bytes one parameter (or KV-cache element) occupies in ``dtype``.

    Parameters
    ----------
    dtype : str or torch.dtype
        See :func:`canonical_dtype`.

    Returns
    -------
    float
        ``8, 4, 2, 1`` or ``0.5`` (4-bit formats; scales of quantised formats are
        not counted).
    """
    return _BYTES[canonical_dtype(dtype)]
