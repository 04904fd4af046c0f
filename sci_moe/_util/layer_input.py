"""The check of a layer's input tensor (the MoE layers', the decompositions')."""

from __future__ import annotations

import torch

__all__ = ["check_layer_input"]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _autocast_on(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # pragma: no cover - torch < 2.4 has no device argument
        return torch.is_autocast_enabled()


def _all_finite(x: torch.Tensor) -> bool:
    """Whether every element of ``x`` is finite, in one reduction when it is.

    A sum with a NaN or an Inf term is not finite (IEEE 754), so a finite sum proves
    every element finite; a non-finite sum (also an overflow of finite elements) falls
    back to the elementwise test. ``isfinite(x).all()`` alone writes a boolean tensor of
    ``x``'s size on every layer call.
    """
    with torch.no_grad():
        return bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def check_layer_input(
    x: torch.Tensor,
    d_model: int,
    check_finite: bool = True,
    dtype: torch.dtype | None = None,
) -> None:
    """Raise ``TypeError``/``ValueError`` for an input an MoE layer cannot take.

    Checks that ``x`` is a floating tensor of shape ``(..., d_model)``, with
    ``check_finite`` free of NaN/Inf (naming the first bad index), and with ``dtype``
    (the layer's weight dtype) of that dtype, unless autocast is enabled on ``x``'s
    device (autocast casts the operands itself).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"x has dtype {x.dtype}; the layer needs a floating dtype "
            "(float16, bfloat16, float32 or float64): cast with x.float()"
        )
    if x.dim() == 0 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (..., {d_model}) but has shape {tuple(x.shape)}")
    if dtype is not None and x.dtype != dtype and not _autocast_on(x.device.type):
        raise ValueError(
            f"x has dtype {x.dtype} but the layer's weights are {dtype}: convert the layer "
            f"with layer.to({x.dtype}) or cast the input with x.to({dtype})"
        )
    if check_finite and not _all_finite(x):
        bad = (~torch.isfinite(x)).nonzero()[0].tolist()
        raise ValueError(f"x contains NaN or Inf (first at index {bad}); check the layer inputs")
